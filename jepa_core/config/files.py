"""TOML in and out, and `section.key=value` overrides; every bad value is a ConfigError naming its key."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from jepa_core.common.atomic import atomic_write
from jepa_core.config.mapping import apply_mapping, config_to_dict
from jepa_core.config.presets import preset
from jepa_core.config.schema import ConfigError
from jepa_core.config.sections import Config


def config_from_dict(data: dict[str, Any], source: str = "config") -> Config:
    data = dict(data)
    base = data.pop("preset", "tiny")
    if not isinstance(base, str):
        raise ConfigError(f"{source}: preset must be a string, got {base!r}")
    try:
        cfg = preset(base)
    except ConfigError as exc:  # say which file asked for it
        raise ConfigError(f"{source}: {exc}") from None
    apply_mapping(cfg, data, source)
    return cfg


def load_config(path: str | Path) -> Config:
    """Read a TOML file. An optional top-level `preset = "tiny"|"small"|"base"` picks the base (tiny by default)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:  # its message carries the line and column
        raise ConfigError(f"{path}: malformed TOML: {exc}") from exc
    except RecursionError:  # tomllib parses nesting by recursion: hundreds of levels exhaust the stack
        raise ConfigError(f"{path}: nested too deeply to read (arrays or tables hundreds of levels deep); "
                          "a run config is at most two levels deep") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    return config_from_dict(data, source=str(path))


def _parse_value(item: str, text: str) -> Any:
    try:
        doc = tomllib.loads(f"v = {text}")
    except tomllib.TOMLDecodeError:
        return text  # a bare word such as `cosine` is a string
    except RecursionError:
        shown = item if len(item) <= 80 else item[:77] + "..."
        raise ConfigError(f"--set {shown!r}: the value is nested too deeply to read") from None
    if len(doc) != 1:  # "1e-3\n[model]\n..." would otherwise set the value and silently drop the rest
        raise ConfigError(f"--set {item!r}: expected one value after '=', got more TOML after it")
    return doc["v"]


def apply_overrides(cfg: Config, overrides: list[str]) -> Config:
    """Apply `section.key=value` strings (values in TOML syntax; bare words are strings) in place."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected section.key=value")
        dotted, text = item.split("=", 1)
        parts = dotted.strip().split(".")
        if len(parts) != 2:
            raise ConfigError(f"--set {item!r}: expected section.key=value, e.g. optim.lr=5e-4")
        section, key = parts
        apply_mapping(cfg, {section: {key: _parse_value(item, text.strip())}}, source="--set")
    return cfg


# TOML basic strings must escape every control character but tab; written as \uXXXX, any string round-trips.
_TOML_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f]")


def _toml_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def toml_value(value: Any) -> str:
    """`value` spelled as a TOML value (strings escaped so that any string round-trips)."""
    return _toml_value(value)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        escaped = _TOML_CONTROL.sub(_toml_escape, value.replace("\\", "\\\\").replace('"', '\\"'))
        return f'"{escaped}"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML")


def config_to_toml(cfg: Config) -> str:
    lines: list[str] = []
    for section, values in config_to_dict(cfg).items():
        lines.append(f"[{section}]")
        lines.extend(f"{key} = {_toml_value(value)}" for key, value in values.items())
        lines.append("")
    return "\n".join(lines)


def save_config(cfg: Config, path: str | Path) -> None:
    atomic_write(Path(path), config_to_toml(cfg).encode("utf-8"))  # a crash never leaves half a config.toml
