"""Dict <-> dataclass: a nested mapping (TOML, a preset) applied onto a `Config`, every value type-checked."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from jepa_core.config.rules import RETIRED_KEYS
from jepa_core.config.sections import SECTIONS, Config, ConfigError


TOML_INT_MIN, TOML_INT_MAX = -(2**63), 2**63 - 1


def config_to_dict(cfg: Config) -> dict[str, dict[str, Any]]:
    return dataclasses.asdict(cfg)


def coerce_value(key: str, expected: Any, value: Any) -> Any:
    """Check a TOML value against the default's type; ints are accepted where floats are expected."""
    if isinstance(expected, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {value!r}")
        return value
    if isinstance(expected, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        if not TOML_INT_MIN <= value <= TOML_INT_MAX:  # config.toml could not hold it, nor any loop reach it
            raise ConfigError(f"{key}: {value} is outside TOML's 64-bit integer range")
        return value
    if isinstance(expected, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        # TOML spells nan and inf; no setting means anything with them, and NaN passes every `<`/`>` range check.
        if not math.isfinite(value):
            raise ConfigError(f"{key}: expected a finite number, got {value!r}")
        return float(value)
    if isinstance(expected, str):
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        _check_text(key, value)
        return value
    if isinstance(expected, list):
        if not isinstance(value, (list, tuple)) or len(value) != len(expected):
            raise ConfigError(f"{key}: expected a list of {len(expected)} numbers, got {value!r}")
        return [coerce_value(f"{key}[{i}]", e, v) for i, (e, v) in enumerate(zip(expected, value))]
    raise ConfigError(f"{key}: unsupported value {value!r}")


def _check_text(key: str, value: str) -> None:
    # Bytes that are not UTF-8 in a command line reach Python as lone surrogates; config.toml could not hold them.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"{key}: {value!r} is not valid Unicode text (a config file is UTF-8)") from None


def apply_mapping(cfg: Config, data: dict[str, Any], source: str) -> None:
    for section, values in data.items():
        if section not in SECTIONS:
            raise ConfigError(f"{source}: unknown section {section!r}; known sections: {', '.join(SECTIONS)}")
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: [{section}] must be a table of key = value")
        target = getattr(cfg, section)
        names = {f.name for f in dataclasses.fields(target)}
        for key, value in values.items():
            if section == "rules" and key in RETIRED_KEYS and key not in names:
                continue  # a threshold of a rule since redesigned (a run written before): ignored
            if key not in names:
                raise ConfigError(f"{source}: unknown key {section}.{key}; known keys: {', '.join(sorted(names))}")
            setattr(target, key, coerce_value(f"{section}.{key}", getattr(target, key), value))
