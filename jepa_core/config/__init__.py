"""Run configuration as plain data: the sections (`Config` and its dataclasses), the rules' thresholds, the presets,
TOML in and out and `section.key=value` overrides.

Owns: what a run is asked to do, and rejecting a malformed key or value with a ConfigError that names it: the one
check of a config (`check_config`: types and ranges declared on the fields, cross-field checks). Checks that need the
data on disk, the mask sampler or the metric registry (`jepa_core.run.validation.validate_config`) live above.
May import: `jepa_core.common` only. Everything else in the package may import this layer.
"""

from jepa_core.config.schema import CROSS_CHECKS, ConfigError, check_config, check_run_name
from jepa_core.config.files import (
    apply_overrides,
    config_from_dict,
    config_to_toml,
    load_config,
    save_config,
)
from jepa_core.config.mapping import config_to_dict
from jepa_core.config.presets import PRESETS, preset
from jepa_core.config.rules import RETIRED_KEYS, RulesConfig, split_names
from jepa_core.config.sections import (
    CADENCE_KEYS,
    SECTIONS,
    Config,
    DataConfig,
    DiagnosticsConfig,
    EMAConfig,
    EvalConfig,
    FaultsConfig,
    LoggingConfig,
    MaskConfig,
    ModelConfig,
    OptimConfig,
    RuntimeConfig,
)

__all__ = [
    "CADENCE_KEYS", "CROSS_CHECKS", "PRESETS", "RETIRED_KEYS", "SECTIONS", "Config", "ConfigError", "DataConfig",
    "DiagnosticsConfig", "EMAConfig", "EvalConfig", "FaultsConfig", "LoggingConfig", "MaskConfig", "ModelConfig",
    "OptimConfig", "RulesConfig", "RuntimeConfig", "apply_overrides", "check_config", "check_run_name",
    "config_from_dict", "config_to_dict", "config_to_toml", "load_config", "preset", "save_config", "split_names",
]
