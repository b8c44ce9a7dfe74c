"""The config reference (docs/config.md), generated from the dataclasses: every key, its default, unit and meaning.

The meaning of a key is the comment on its line in the dataclass, else the comment block right above it; a key with
neither is an error here (and so in the test that keeps docs/config.md current). The unit is read from the key's
name, what it accepts from its declared type (config.schema: the range the config check enforces). Regenerate with
`python -m jepa_core.config.reference > docs/config.md`.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys

from jepa_core.config.presets import preset
from jepa_core.config.rules import RulesConfig
from jepa_core.config.schema import describe, field_types
from jepa_core.config.sections import Config

_FIELD = re.compile(r"^\s{4}(\w+)\s*:[^=]*=(.*?)(?:#\s*(.*))?$")
_COMMENT = re.compile(r"^\s{4}#\s?(.*)$")
_UNITS = (("online_lead_fall", "times"), ("_every_steps", "steps"), ("_steps", "steps"), ("_readings", "readings"),
          ("_warmups", "lr warm-ups"), ("_break", "noise scales"), ("trend_drift", "noise scales"), ("_fall", "fraction"),
          ("_change", "fraction"), ("_floor", "fraction"), ("_cosine", "cosine"), ("divergence_spike", "times / noise scales"),
          ("_settle_fraction", "fraction of the run"), ("_innovations", "readings"),
          ("_patience", "readings"), ("_fraction", "fraction"), ("_ratio", "ratio"), ("_multiple", "noises"),
          ("_factor", "factor"), ("img_size", "pixels"), ("patch_size", "pixels"), ("_dim", "features"),
          ("batch_size", "images"), ("_scale", "fraction of the image"), ("_aspect", "ratio"), ("lr", "per update"),
          ("_epochs", "epochs"))


def field_comments(cls: type) -> dict[str, str]:
    """field name -> its comment in `cls`'s source: the one on its line, else the comment block right above it."""
    comments: dict[str, str] = {}
    block: list[str] = []
    for line in inspect.getsource(cls).splitlines():
        comment = _COMMENT.match(line)
        if comment:
            block.append(comment.group(1).strip())
            continue
        field = _FIELD.match(line)
        if field:
            text = (field.group(3) or "").strip() or " ".join(block)
            if text:
                comments[field.group(1)] = text
        block = []
    return comments


def unit_of(key: str, value: object) -> str:
    if isinstance(value, bool):
        return "switch"
    for suffix, unit in _UNITS:
        if key.endswith(suffix):
            return unit
    if key.startswith("num_"):
        return "count"
    return "text" if isinstance(value, str) else ""


def _first_sentence(text: str, limit: int = 240) -> str:
    sentence = re.split(r"(?<=\.)\s", text, maxsplit=1)[0]
    return sentence if len(sentence) <= limit else sentence[: limit - 3].rstrip() + "..."


def reference_markdown() -> str:
    """docs/config.md's text. ValueError naming the key when a key has no meaning in its dataclass."""
    defaults, tiny = Config(), preset("tiny")
    lines = ["# Configuration reference", "",
             "Every key of a run config (`config.toml`, `--set section.key=value`), generated from the dataclasses in",
             "`jepa_core/config/` by `python -m jepa_core.config.reference > docs/config.md`; a test fails when this",
             "page is stale. `default` is the dataclass default, `tiny` the value of the `tiny` preset (the built-in",
             "defaults of `jepa train` and the workbench) where it differs, `accepts` the range the config check",
             "enforces (declared on the field's type).", ""]
    for section in dataclasses.fields(Config):
        obj = getattr(defaults, section.name)
        comments = field_comments(type(obj))
        if isinstance(obj, RulesConfig):
            lines += [f"## [{section.name}]", "", "The early-warning rules' thresholds (docs/design.md §7).", ""]
        else:
            lines += [f"## [{section.name}]", ""]
        lines += ["| key | default | tiny | unit | accepts | meaning |", "| --- | --- | --- | --- | --- | --- |"]
        types = field_types(type(obj))
        for field in dataclasses.fields(obj):
            value, tiny_value = getattr(obj, field.name), getattr(getattr(tiny, section.name), field.name)
            meaning = comments.get(field.name)
            if not meaning:
                raise ValueError(f"{section.name}.{field.name}: no comment in {type(obj).__name__} says what it is")
            shown = "" if tiny_value == value else f"`{tiny_value!r}`"
            lines.append(f"| `{field.name}` | `{value!r}` | {shown} | {unit_of(field.name, value)} | "
                         f"{describe(types[field.name])} | {_first_sentence(meaning).replace('|', '/')} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(reference_markdown())
