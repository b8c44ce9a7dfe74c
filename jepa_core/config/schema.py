"""The one check of a run config: what each key accepts, declared on its dataclass field, and how keys relate.

A field's type says its range: `steps: Positive[int]`, `beta1: FractionBelow1`, `target_scale: Pair[OpenFraction]`,
`loss: Literal["smooth_l1", "mse"]` (msgspec.Meta constraints). `check_value` converts a value with
msgspec.convert(strict=True): a string is never turned into a number, a bool is not an integer, and every declared
range holds. Before that every value must be one a TOML file can hold: a finite float, a 64-bit integer, UTF-8 text.
A config file or --set is checked against the types less their ranges (`carried_types`: any value of the right type
round-trips through config.toml); `check_config` checks every field against its declared type and range, then runs
CROSS_CHECKS, the checks that relate keys to each other (each returns a message naming the keys, or None). Every
refusal is a ConfigError naming the key, e.g. `model.depth: expected an integer, got '3'`. Checks that need the data
on disk, the mask sampler or the metric registry live above, with the run (jepa_core.run.validation.validate_config,
which calls check_config first).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import msgspec
from msgspec import Meta
from msgspec import inspect as mi

Config = Any  # jepa_core.config.sections.Config, which imports this module (through rules) for its field types


class ConfigError(ValueError):
    """A config file, key or value that cannot be used; the message names it."""


N = TypeVar("N", int, float)
E = TypeVar("E")
Positive = Annotated[N, Meta(gt=0)]
NonNegative = Annotated[N, Meta(ge=0)]
AtLeast1 = Annotated[int, Meta(ge=1)]
AtLeast2 = Annotated[int, Meta(ge=2)]
Fraction = Annotated[float, Meta(ge=0, le=1)]
FractionBelow1 = Annotated[float, Meta(ge=0, lt=1)]
OpenFraction = Annotated[float, Meta(gt=0, lt=1)]
Rate = Annotated[float, Meta(gt=0, le=1)]
PAIR_LENGTH = Meta(min_length=2, max_length=2)
Pair = Annotated[list[E], PAIR_LENGTH]  # [min, max]; min <= max is a cross-field check (pairs_ordered)
NonEmpty = Annotated[str, Meta(min_length=1)]
# A pattern's description says what it accepts; a number's description (if any) says why its range is what it is.
MetricNames = Annotated[str, Meta(pattern=r"[^\s,]", description="one or more comma-separated metric names")]

TOML_INT_MIN, TOML_INT_MAX = -(2**63), 2**63 - 1
_WORDS = {mi.IntType: "an integer", mi.FloatType: "a number", mi.BoolType: "true or false", mi.StrType: "a string",
          mi.LiteralType: "a string", mi.ListType: "a list of 2 numbers"}


@functools.cache
def declared_types(cls: type) -> dict[str, Any]:
    """field name -> its declared type, ranges included (Annotated[int, Meta(gt=0)], Literal[...])."""
    return typing.get_type_hints(cls, include_extras=True)


@functools.cache
def carried_types(cls: type) -> dict[str, Any]:
    """field name -> the type a config file or --set may carry for it: the declared type less its ranges (a Literal is
    any string), so that any value of the right type round-trips through config.toml, valid for training or not."""
    return {name: _less_ranges(tp) for name, tp in declared_types(cls).items()}


def _less_ranges(tp: Any) -> Any:
    args = typing.get_args(tp)
    if typing.get_origin(tp) is Annotated:
        inner = _less_ranges(args[0])
        return Annotated[inner, PAIR_LENGTH] if typing.get_origin(inner) is list else inner
    if typing.get_origin(tp) is Literal:
        return str
    return list[_less_ranges(args[0])] if typing.get_origin(tp) is list else tp


def field_types(cls: type) -> dict[str, mi.Type]:
    """field name -> msgspec's view of its declared type (constraints included)."""
    return {name: mi.type_info(tp) for name, tp in declared_types(cls).items()}


def _bound(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


def describe(t: mi.Type) -> str:
    """What a type accepts, in words: 'positive', 'at least 1', 'in (0, 1]', 'smooth_l1 or mse'; '' for anything."""
    why = ""
    if isinstance(t, mi.Metadata):
        why = (t.extra_json_schema or {}).get("description", "")
        t = t.type
    if isinstance(t, mi.LiteralType):
        *rest, last = (str(v) for v in t.values)
        return f"{', '.join(rest)} or {last}" if rest else last
    if isinstance(t, mi.ListType):
        inner = describe(t.item_type)
        return f"[min, max], each {inner}" if inner else "[min, max]"
    if isinstance(t, mi.StrType):
        return why or ("non-empty" if t.min_length else "")
    if not isinstance(t, (mi.IntType, mi.FloatType)):
        return ""
    low = ("[", t.ge) if t.ge is not None else ("(", t.gt) if t.gt is not None else None
    high = ("]", t.le) if t.le is not None else (")", t.lt) if t.lt is not None else None
    if low and high:
        text = f"in {low[0]}{_bound(low[1])}, {_bound(high[1])}{high[0]}"
    elif low:
        text = {("(", 0): "positive", ("[", 0): ">= 0"}.get(low, f"{'at least' if low[0] == '[' else '>'} "
                                                                f"{_bound(low[1])}")
    elif high:
        text = f"{'at most' if high[0] == ']' else '<'} {_bound(high[1])}"
    else:
        text = ""
    if t.multiple_of:
        text = f"{text} and a multiple of {t.multiple_of}" if text else f"a multiple of {t.multiple_of}"
    return f"{text} ({why})" if why and text else text


def _toml_problem(key: str, value: Any) -> str | None:
    """Why `value` cannot be written to config.toml, or None. NaN passes every range check, so it is refused here."""
    if isinstance(value, (list, tuple)):
        return next(filter(None, (_toml_problem(f"{key}[{i}]", v) for i, v in enumerate(value))), None)
    if isinstance(value, float) and not math.isfinite(value):
        return f"{key}: expected a finite number, got {value!r}"
    if isinstance(value, int) and not isinstance(value, bool) and not TOML_INT_MIN <= value <= TOML_INT_MAX:
        return f"{key}: {value} is outside TOML's 64-bit integer range"
    if isinstance(value, str):
        try:  # bytes that are not UTF-8 in a command line reach Python as lone surrogates
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"{key}: {value!r} is not valid Unicode text (a config file is UTF-8)"
    return None


def check_value(key: str, tp: Any, value: Any) -> Any:
    """`value` converted to `tp` (an int becomes a float where a float is declared); ConfigError naming `key` (or its
    list item) when it is not of that type, is outside its range, or is not what a TOML file can hold."""
    problem = _toml_problem(key, value)
    if problem:
        raise ConfigError(problem)
    try:
        return msgspec.convert(value, tp, strict=True)
    except msgspec.ValidationError as exc:
        text, _, path = str(exc).partition(" - at `$")
        t = mi.type_info(tp)
        item = re.fullmatch(r"\[(\d+)\]`", path)
        if item:
            key, value = f"{key}[{item.group(1)}]", value[int(item.group(1))]
            t = (t.type if isinstance(t, mi.Metadata) else t).item_type  # type: ignore[union-attr]
        shown = t.type if isinstance(t, mi.Metadata) else t
        if ", got `" in text or isinstance(shown, mi.ListType):
            raise ConfigError(f"{key}: expected {_WORDS.get(type(shown), 'another type')}, got {value!r}") from None
        raise ConfigError(f"{key}: must be {describe(t)}, got {value!r}") from None


def check_fields(section: str, obj: Any) -> None:
    """Every field of a section (a dataclass instance, possibly set field by field in Python) against its declared
    type and range; ConfigError naming `section.key` for the first that does not fit."""
    for name, tp in declared_types(type(obj)).items():
        check_value(f"{section}.{name}", tp, getattr(obj, name))


# A run name becomes a directory name, a path in messages and a title in reports: a portable file-name character
# set, no leading "." (hidden, "..") or "-" (read as an option by shell tools), short enough for any file system.
RUN_NAME_MAX_CHARS = 100
_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def run_name_problem(key: str, name: str) -> str | None:
    """Why `name` (empty: a timestamped name) is not a safe directory name, naming `key`; None if it is."""
    if not name or (len(name) <= RUN_NAME_MAX_CHARS and _RUN_NAME.fullmatch(name)):
        return None
    shown = name if len(name) <= 40 else name[:40] + "..."
    return (f"{key} {shown!r} ({len(name)} characters) is not a usable run name: use at most {RUN_NAME_MAX_CHARS} "
            "ASCII letters, digits, '.', '_' and '-', not starting with '.' or '-' (no spaces, slashes or "
            "control characters)")


def check_run_name(key: str, name: str) -> None:
    problem = run_name_problem(key, name)
    if problem:
        raise ConfigError(problem)


def usable_run_name(cfg: Config) -> str | None:
    return run_name_problem("logging.name", cfg.logging.name)


def pairs_ordered(cfg: Config) -> str | None:
    for section in dataclasses.fields(cfg):
        for key, value in dataclasses.asdict(getattr(cfg, section.name)).items():
            if isinstance(value, list) and value[0] > value[1]:  # every list key is a [min, max] pair
                return f"{section.name}.{key}: min {value[0]} is greater than max {value[1]}"
    return None


def patches_tile_image(cfg: Config) -> str | None:
    m = cfg.model
    return (f"model.img_size {m.img_size} is not divisible by model.patch_size {m.patch_size}"
            if m.img_size % m.patch_size else None)


def heads_split_width(cfg: Config) -> str | None:
    for dim, heads in (("embed_dim", "num_heads"), ("pred_dim", "pred_num_heads")):
        if getattr(cfg.model, dim) % getattr(cfg.model, heads):
            return (f"model.{dim} {getattr(cfg.model, dim)} is not divisible by model.{heads} "
                    f"{getattr(cfg.model, heads)}")
    return None


def mlp_has_width(cfg: Config) -> str | None:
    # method/model.py builds every block's MLP with int(dim * mlp_ratio) hidden units, in the encoders (embed_dim) and
    # in the predictor (pred_dim); a zero width builds an empty Linear that trains nothing.
    m = cfg.model
    for key, dim in (("embed_dim", m.embed_dim), ("pred_dim", m.pred_dim)):
        if int(dim * m.mlp_ratio) < 1:
            return (f"model.mlp_ratio {m.mlp_ratio} gives an MLP hidden width of int({dim} * {m.mlp_ratio}) = "
                    f"{int(dim * m.mlp_ratio)} for model.{key}={dim}; it must be at least 1")
    return None


def data_path_given(cfg: Config) -> str | None:
    d = cfg.data
    return f"data.path is required when data.dataset = {d.dataset!r}" if d.dataset != "shapes" and not d.path else None


def shapes_fill_a_batch(cfg: Config) -> str | None:
    # a batch would hold the same images several times over (folder / npz: counted on disk, in run.validation)
    d, batch = cfg.data, cfg.optim.batch_size
    return (f"data.num_train {d.num_train} is smaller than optim.batch_size {batch}: render at least one batch of "
            "images or lower the batch size" if d.dataset == "shapes" and d.num_train < batch else None)


def warmup_within_run(cfg: Config) -> str | None:
    o = cfg.optim
    return (f"optim.warmup_steps {o.warmup_steps} exceeds optim.steps {o.steps}: lower the warm-up "
            "(optim.warmup_steps) or train longer" if o.warmup_steps > o.steps else None)


def microbatches_split_batch(cfg: Config) -> str | None:
    o = cfg.optim
    return (f"optim.gns_microbatches {o.gns_microbatches} must divide optim.batch_size {o.batch_size}"
            if o.batch_size % o.gns_microbatches else None)


def ema_does_not_fall(cfg: Config) -> str | None:
    e = cfg.ema
    return (f"ema.start ({e.start}) must not exceed ema.end ({e.end}): a momentum that falls over the run makes the "
            "target follow the online encoder ever more closely" if e.start > e.end else None)


def lidar_has_images(cfg: Config) -> str | None:
    return (f"eval.lidar_images must be 0 (off) or at least 2, got {cfg.eval.lidar_images}"
            if cfg.eval.lidar_images == 1 else None)


def one_target_fault(cfg: Config) -> str | None:
    f = cfg.faults
    return ("faults.frozen_target and faults.target_copies_online cannot both be on"
            if f.frozen_target and f.target_copies_online else None)


CROSS_CHECKS: tuple[Callable[[Config], str | None], ...] = (
    usable_run_name, pairs_ordered, patches_tile_image, heads_split_width, mlp_has_width, data_path_given,
    shapes_fill_a_batch, warmup_within_run, microbatches_split_batch, ema_does_not_fall, lidar_has_images,
    one_target_fault)


def check_config(cfg: Config) -> Config:
    """`cfg` itself if every key's type and range and every cross-field check hold; else ConfigError naming the key."""
    for section in dataclasses.fields(cfg):
        check_fields(section.name, getattr(cfg, section.name))
    for check in CROSS_CHECKS:
        problem = check(cfg)
        if problem:
            raise ConfigError(problem)
    return cfg
