"""Dict <-> dataclass: a nested mapping (TOML, --set, a preset) applied onto a `Config`, every section checked."""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

from jepa_core.config.rules import RETIRED_KEYS
from jepa_core.config.schema import ConfigError, carried_types, check_value
from jepa_core.config.sections import SECTIONS, Config


def config_to_dict(cfg: Config) -> dict[str, dict[str, Any]]:
    return dataclasses.asdict(cfg)


def apply_mapping(cfg: Config, data: dict[str, Any], source: str) -> None:
    """Set `data`'s `section.key` values on `cfg`. ConfigError naming `source` for an unknown section or key, and
    naming the key for a value of the wrong type (ranges and relations are check_config's: a file may hold any
    value of the right type, so that a config, valid or not, round-trips through config.toml)."""
    for section, values in data.items():
        if section not in SECTIONS:
            raise ConfigError(f"{source}: unknown section {section!r}; known sections: {', '.join(SECTIONS)}")
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: [{section}] must be a table of key = value")
        target = getattr(cfg, section)
        types = carried_types(type(target))
        for key in values:
            if key not in types and not (section == "rules" and key in RETIRED_KEYS):
                near = difflib.get_close_matches(key, types, n=1)
                hint = f" (did you mean {section}.{near[0]}?)" if near else ""
                raise ConfigError(f"{source}: unknown key {section}.{key}{hint}; known keys: "
                                  f"{', '.join(sorted(types))}")
        # every value checked before any is set; a retired rule threshold (a run written before its rule's redesign)
        # is ignored
        checked = {key: check_value(f"{section}.{key}", types[key], v) for key, v in values.items() if key in types}
        for key, value in checked.items():
            setattr(target, key, value)
