"""The train notebook's config form turned into a validated `Plan`: what Start, Step N and Launch detached use."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from jepa_core.config import CADENCE_KEYS, PRESETS, Config, apply_overrides, preset
from jepa_core.run.validation import validate_config


@dataclass(frozen=True)
class Plan:
    """A preset plus `section.key=value` overrides, and the Config they give (validated)."""

    preset: str
    overrides: tuple[str, ...]
    cfg: Config
    note: str = ""  # what the form adjusted on its own (a short run's warm-up), said beside "Config OK"

    @property
    def name(self) -> str:
        """The run name the user typed ("" means a timestamp is picked when the run starts)."""
        return self.cfg.logging.name or ""

    @property
    def cadences(self) -> dict[str, int]:
        return {k: int(getattr(self.cfg.diagnostics, k)) for k in CADENCE_KEYS}

    def fresh_config(self) -> Config:
        """A private copy for one trainer: a trainer edits its config (cadence changes) while it runs."""
        return copy.deepcopy(self.cfg)

    def cli_overrides(self) -> list[str]:
        """The overrides for `jepa train --set`, without the name (passed as --name)."""
        return [o for o in self.overrides if not o.startswith("logging.name=")]


# The train notebook's config form: each key a `section.key` of the config, its widget's starting value the chosen
# preset's (an untouched form is the preset as shipped, `small` and `base` included).
FORM_KEYS: tuple[str, ...] = (
    "data.dataset", "data.path", "data.num_train", "optim.steps", "optim.warmup_steps", "optim.batch_size", "optim.lr",
    "ema.start",
    "ema.end", "ema.schedule", "masks.target_scale", "masks.context_scale", "eval.at_start", "runtime.device",
    "runtime.num_threads", "logging.name",
)
PRESET_NAMES: tuple[str, ...] = tuple(PRESETS)  # the built-in presets, in their order


def form_defaults(preset_name: str) -> dict[str, Any]:
    """The form's starting values for a preset: FORM_KEYS read from its config (lists as lists, as widgets hold
    them). The cadence sliders start from the preset's `diagnostics` section."""
    cfg = preset(preset_name)
    values = {}
    for key in FORM_KEYS:
        section, name = key.split(".")
        value = getattr(getattr(cfg, section), name)
        values[key] = list(value) if isinstance(value, (list, tuple)) else value
    return values


def form_overrides(values: Mapping[str, Any]) -> list[str]:
    """`section.key=value` strings (TOML values) for `apply_overrides` or `jepa train --set`.

    JSON spells numbers, booleans, strings and lists the way TOML does, so json.dumps is the encoder.
    """
    out = []
    for key, value in values.items():
        if "." not in key:
            raise ValueError(f"override key {key!r} must be section.key")
        if isinstance(value, tuple):
            value = list(value)
        out.append(f"{key}={json.dumps(value)}")
    return out


def plan_from_form(form: Mapping[str, Any], cadences: Mapping[str, Any] = (),
                   faults: Mapping[str, Any] = (), extra: Mapping[str, Any] = ()) -> Plan:
    """The plan for the form's values; raises ValueError (ConfigError) naming the bad key.

    `form` holds "preset" and `section.key` values; an empty "data.path" is dropped for the built-in dataset;
    `cadences` are `*_every_steps` values (diagnostics section); `extra` adds overrides (tests: a tmp runs_dir).
    """
    values = {k: v for k, v in dict(form).items() if k != "preset"}
    name = str(dict(form).get("preset", "tiny"))
    note = _scale_untouched_warmup(values, preset(name))
    if values.get("data.dataset", "shapes") == "shapes":
        values.pop("data.path", None)
    if "optim.lr" in values:
        values["optim.lr"] = float(values["optim.lr"])
    values.update({f"diagnostics.{k}": int(v) for k, v in dict(cadences).items()})
    values.update(dict(faults))
    values.update(dict(extra))
    overrides = form_overrides(values)
    cfg = validate_config(apply_overrides(preset(name), overrides))
    return Plan(preset=name, overrides=tuple(overrides), cfg=cfg, note=note)


def _scale_untouched_warmup(values: dict[str, Any], base: Config) -> str:
    """A run shorter than its preset's warm-up, with the warm-up field left at the preset's value, gets the preset's
    share of warm-up instead (tiny: 80 of 800 steps, so 2 of a 20-step run); returns what was done, in words. A
    warm-up the user typed is kept, and validation names it when it exceeds the steps."""
    steps, warmup = values.get("optim.steps"), values.get("optim.warmup_steps")
    if steps is None or warmup is None or int(warmup) != base.optim.warmup_steps or int(steps) >= int(warmup):
        return ""
    share = base.optim.warmup_steps / base.optim.steps
    values["optim.warmup_steps"] = scaled = max(0, min(int(steps), round(int(steps) * share)))
    return (f"warm-up scaled to {scaled} step(s) ({share:.0%} of the run, as in the {base.optim.steps}-step preset; "
            "type a warm-up to choose it)")


# What the workbench's "rewind here" form offers: what a user changes after an alert (learning rate, weight decay,
# EMA momentum, the fault switches; `faults.target_gradients` changes the optimizer's groups and cannot be rewound).
REWIND_KEYS: tuple[str, ...] = (
    "optim.lr", "optim.weight_decay", "optim.final_weight_decay", "ema.start", "ema.end",
    "faults.mask_leak_fraction", "faults.frozen_target", "faults.target_copies_online", "faults.lr_blowup_factor",
    "faults.collapse_weight",
)


def rewind_defaults(run_dir: str | Path) -> dict[str, Any]:
    """REWIND_KEYS as the run at `run_dir` has them (its config.toml): the rewind form starts from the parent."""
    from jepa_core.run.rundir import load_run_config

    cfg = load_run_config(Path(run_dir))
    return {key: getattr(getattr(cfg, key.split(".")[0]), key.split(".")[1]) for key in REWIND_KEYS}
