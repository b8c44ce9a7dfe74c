"""Property-based tests (Hypothesis): the config loader and `--set` parser, the metric stream's write/read round
trip, and the mask sampler's guarantees, over inputs nobody thought to write down.

Example counts are modest so the file runs in seconds on a small CPU; `deadline=None` because the first example of
a test pays for imports and warm-up.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import struct
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from jepa_core.config import Config, ConfigError, apply_overrides, config_to_toml, load_config, preset
from jepa_core.config.files import _toml_value

from jepa_core.run.validation import validate_config
from jepa_core.method.masks import MaskConfigError, MaskSampler, block_size, check_mask_config
from jepa_core.metrics.reader import read_metrics
from jepa_core.metrics.stream import TEXT_FIELDS, JsonlWriter, decode_row, encode_row, iter_rows

FEW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SOME = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@contextmanager
def scratch_file(name: str) -> Iterator[Path]:
    # Hypothesis runs many examples per test call, so pytest's per-test tmp_path would be shared between them.
    with tempfile.TemporaryDirectory() as folder:
        yield Path(folder) / name


# ================================================================================================ config
def _fields() -> list[tuple[str, str, Any]]:
    cfg = preset("tiny")
    return [(section.name, f.name, getattr(getattr(cfg, section.name), f.name))
            for section in dataclasses.fields(cfg) for f in dataclasses.fields(getattr(cfg, section.name))]


FIELDS = _fields()
FLOAT_FIELDS = [(s, k) for s, k, v in FIELDS if isinstance(v, float)]
finite_floats = st.floats(allow_nan=False, allow_infinity=False)


def value_for(default: Any) -> st.SearchStrategy[Any]:
    """Any value of the setting's type that the TOML writer and loader must carry, valid for training or not."""
    if isinstance(default, bool):
        return st.booleans()
    if isinstance(default, int):
        return st.integers(-(2**63), 2**63 - 1)  # TOML integers are 64-bit
    if isinstance(default, float):
        return finite_floats
    if isinstance(default, str):
        return st.text()  # every Unicode scalar: quotes, backslashes, control characters, non-BMP
    return st.lists(finite_floats, min_size=len(default), max_size=len(default))


@st.composite
def configs(draw: st.DrawFn) -> Config:
    cfg = preset(draw(st.sampled_from(["tiny", "small"])))
    for section, key, default in draw(st.lists(st.sampled_from(FIELDS), max_size=12, unique_by=lambda f: f[:2])):
        setattr(getattr(cfg, section), key, draw(value_for(default)))
    return cfg


def same_bits(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return struct.pack(">d", a) == struct.pack(">d", b)  # -0.0 vs 0.0 and every last bit
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_bits(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


@FEW
@given(cfg=configs())
def test_any_config_round_trips_through_toml(cfg: Config) -> None:
    with scratch_file("config.toml") as path:
        path.write_text(config_to_toml(cfg), encoding="utf-8")
        again = load_config(path)
    assert again == cfg
    for section, key, _ in FIELDS:
        assert same_bits(getattr(getattr(again, section), key), getattr(getattr(cfg, section), key)), (section, key)


@SOME
@given(field=st.sampled_from(FLOAT_FIELDS), value=finite_floats)
def test_floats_round_trip_exactly_through_toml_and_set(field: tuple[str, str], value: float) -> None:
    section, key = field
    cfg = preset("tiny")
    setattr(getattr(cfg, section), key, value)
    with scratch_file("config.toml") as path:
        path.write_text(config_to_toml(cfg), encoding="utf-8")
        assert same_bits(getattr(getattr(load_config(path), section), key), value)
    via_set = apply_overrides(preset("tiny"), [f"{section}.{key}={value!r}"])
    assert same_bits(getattr(getattr(via_set, section), key), value)


@SOME
@given(field=st.sampled_from(FIELDS), data=st.data())
def test_set_applies_any_value_written_as_toml(field: tuple[str, str, Any], data: st.DataObject) -> None:
    section, key, default = field
    value = data.draw(value_for(default))
    cfg = apply_overrides(preset("tiny"), [f"{section}.{key}={_toml_value(value)}"])
    assert same_bits(getattr(getattr(cfg, section), key), value)


KEY_NAMED = re.compile(r"\b(" + "|".join(f.name for f in dataclasses.fields(Config)) + r")\.[a-z_0-9]+")


def names_a_key(message: str) -> bool:
    return bool(KEY_NAMED.search(message))


def validated_or_config_error(cfg: Config) -> None:
    """validate_config() either passes or raises a ConfigError naming a key; any other exception fails the test."""
    try:
        validate_config(cfg)
    except ConfigError as exc:
        assert names_a_key(str(exc)), str(exc)


@SOME
@given(item=st.text(max_size=60))
def test_set_arbitrary_text_raises_only_config_error(item: str) -> None:
    try:
        cfg = apply_overrides(preset("tiny"), [item])
    except ConfigError as exc:
        assert "--set" in str(exc) or names_a_key(str(exc)), str(exc)
        return
    validated_or_config_error(cfg)


toml_literals = st.one_of(
    st.sampled_from(["nan", "+inf", "-inf", "true", "false", "1979-05-27", "07:32:00", "{a = 1}", "[]", "[1, 2]",
                     "[nan, 1.0]", "[0.1, 0.2, 0.3]", "'single'", '"""multi\nline"""', "0x1F", "1_000", "[[1]]",
                     "", "=", "[", "{", '"unterminated', "cosine", "../../etc", "1e400", "-0.0", "1\n[model]\nx=1"]),
    st.integers().map(str),
    finite_floats.map(repr),
    st.text(max_size=20).map(_toml_value),
    st.text(max_size=20),
)


@SOME
@given(field=st.sampled_from(FIELDS), text=toml_literals)
def test_set_any_value_on_a_known_key_applies_or_names_the_key(field: tuple[str, str, Any], text: str) -> None:
    section, key, _ = field
    try:
        cfg = apply_overrides(preset("tiny"), [f"{section}.{key}={text}"])
    except ConfigError as exc:
        assert f"{section}.{key}" in str(exc), str(exc)
        return
    validated_or_config_error(cfg)


@st.composite
def toml_documents(draw: st.DrawFn) -> str:
    """TOML-ish text: known and unknown sections and keys with every kind of value, some of it malformed."""
    lines = []
    if draw(st.booleans()):
        lines.append("preset = " + draw(st.sampled_from(['"tiny"', '"small"', '"huge"', "1", "tiny"])))
    for _ in range(draw(st.integers(0, 4))):
        lines.append(f"[{draw(st.one_of(st.sampled_from([s for s, _, _ in FIELDS]), st.text(max_size=8)))}]")
        for _ in range(draw(st.integers(0, 4))):
            key = draw(st.one_of(st.sampled_from([k for _, k, _ in FIELDS]), st.text(max_size=8)))
            lines.append(f"{key} = {draw(toml_literals)}")
    return "\n".join(lines)


def loaded_or_config_error(path: Path) -> None:
    """load_config either returns a Config (which then validates or says which key is wrong) or raises a
    ConfigError naming the file or a key; any other exception fails the test."""
    try:
        cfg = load_config(path)
    except ConfigError as exc:
        assert str(path) in str(exc) or names_a_key(str(exc)), str(exc)
        return
    validated_or_config_error(cfg)


@SOME
@given(text=st.one_of(toml_documents(), st.text(max_size=200)))
def test_load_config_raises_only_config_error_on_any_text(text: str) -> None:
    with scratch_file("config.toml") as path:
        path.write_text(text, encoding="utf-8")
        loaded_or_config_error(path)


@FEW
@given(raw=st.binary(max_size=200))
def test_load_config_raises_only_config_error_on_any_bytes(raw: bytes) -> None:
    with scratch_file("config.toml") as path:
        path.write_bytes(raw)
        loaded_or_config_error(path)


# ================================================================================================ metric stream
def _strict(line: str) -> Any:
    def reject(token: str) -> None:
        raise ValueError(f"non-strict JSON token {token}")

    return json.loads(line, parse_constant=reject)


def same_value(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return type(a) is type(b) and a == b


metric_names = st.text(max_size=12).filter(lambda k: k not in TEXT_FIELDS and k not in ("step", "attempt"))
metric_values = st.one_of(st.floats(), st.integers(-(2**63), 2**63 - 1))
steps = st.integers(0, 2**62)  # past 2**53: the reader's fast path must hand those to the exact one


@st.composite
def stream_rows(draw: st.DrawFn) -> dict:
    kind = draw(st.sampled_from(["metrics", "metrics", "alert", "event"]))
    row: dict[str, Any] = {"step": draw(steps)}
    if kind == "metrics":
        row.update(draw(st.dictionaries(metric_names, metric_values, max_size=5)))
    elif kind == "alert":
        # Text fields hold prose: a message that reads "NaN" must come back as the string "NaN".
        text = st.one_of(st.text(max_size=20), st.sampled_from(["NaN", "Infinity", "-Infinity"]))
        row.update(event="alert", rule=draw(text), severity=draw(text), metric=draw(text), value=draw(st.floats()),
                   message=draw(text))
    else:
        row.update(event=draw(st.text(max_size=10).filter(lambda e: e != "alert")), name=draw(st.text(max_size=10)),
                   text=draw(st.text(max_size=10)))
    return row


@SOME
@given(row=stream_rows(), big=st.integers())
def test_encode_row_is_strict_json_and_decodes_to_the_same_row(row: dict, big: int) -> None:
    row = {**row, "big_int": big} if "event" not in row else row
    line = encode_row(row)
    assert "\n" not in line  # one row, one line
    _strict(line)
    back = decode_row(line)
    assert back.keys() == row.keys() and all(same_value(back[k], row[k]) for k in row), (row, back)


@FEW
@given(rows=st.lists(stream_rows(), min_size=1, max_size=12), torn=st.integers(1, 10_000))
def test_written_stream_reads_back_exactly(rows: list[dict], torn: int) -> None:
    with scratch_file("metrics.jsonl") as path:
        with JsonlWriter(path, attempt=0) as writer:
            for row in rows:
                writer.write(row)
        lines = path.read_text(encoding="utf-8").split("\n")
        assert lines[-1] == "" and len(lines) == len(rows) + 1
        for line in lines[:-1]:
            _strict(line)
        # A writer killed mid-line leaves a prefix of its next row: readers skip it and lose nothing else.
        extra = encode_row({"step": 0, "attempt": 0, "loss": 1.0})
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(extra[: 1 + torn % (len(extra) - 1)])
        written = [{"step": r["step"], "attempt": 0, **r} for r in rows]
        back = list(iter_rows(path))
        assert len(back) == len(written)
        for got, want in zip(back, written):
            assert got.keys() == want.keys() and all(same_value(got[k], want[k]) for k in want), (want, got)
        check_table(read_metrics(path), written)


def check_table(table: Any, written: list[dict]) -> None:
    assert table.torn_lines == 1 and table.bad_lines == []
    metric_rows = [r for r in written if "event" not in r]
    scalars = table.scalars
    assert scalars["step"].tolist() == [r["step"] for r in metric_rows]
    for column in scalars.columns:
        if column in ("step", "attempt"):
            continue
        for got, row in zip(scalars[column].tolist(), metric_rows):
            want = float(row[column]) if column in row else math.nan
            assert same_value(got, want), (column, row, got)
    assert {c for r in metric_rows for c in r} <= set(scalars.columns) | {"step", "attempt"}
    alerts = [r for r in written if r.get("event") == "alert"]
    assert table.alerts["step"].tolist() == [r["step"] for r in alerts]
    for key in ("rule", "severity", "metric", "message"):
        assert table.alerts[key].tolist() == [r[key] for r in alerts]
    assert all(same_value(a, b["value"]) for a, b in zip(table.alerts["value"].tolist(), alerts))
    events = [r for r in written if "event" in r and r["event"] != "alert"]
    assert table.events["event"].tolist() == [r["event"] for r in events]
    if events:
        assert table.events["name"].tolist() == [r["name"] for r in events]


@pytest.mark.parametrize("name", ['a"b', "back\\slash", "ctrl\x01", "new\nline", ""])
def test_reader_keeps_metrics_whose_names_msgspec_cannot_rename(tmp_path: Path, name: str) -> None:
    # Found by the round trip above: read_metrics raised ValueError from msgspec.defstruct for such a name.
    path = tmp_path / "metrics.jsonl"
    with JsonlWriter(path, attempt=0) as writer:
        writer.write({"step": 1, name: 0.5, "loss": math.nan})
        writer.write({"step": 2, name: math.inf, "loss": 2})
    table = read_metrics(path)
    assert table.scalars[name].tolist() == [0.5, math.inf] and table.bad_lines == []
    assert math.isnan(table.scalars["loss"][0]) and table.scalars["loss"][1] == 2.0


# ================================================================================================ mask sampler
def _pair(draw: st.DrawFn, lo: float, hi: float) -> tuple[float, float]:
    a, b = draw(st.floats(lo, hi)), draw(st.floats(lo, hi))
    return (min(a, b), max(a, b))


@st.composite
def mask_setups(draw: st.DrawFn) -> dict[str, Any]:
    grid_h, grid_w = draw(st.integers(1, 12)), draw(st.integers(1, 12))
    setup = dict(grid_h=grid_h, grid_w=grid_w, num_targets=draw(st.integers(1, 5)),
                 target_scale=_pair(draw, 0.01, 0.5), target_aspect=_pair(draw, 0.3, 3.0),
                 context_scale=_pair(draw, 0.2, 1.0), context_aspect=_pair(draw, 0.5, 2.0),
                 min_keep=draw(st.integers(1, max(1, grid_h * grid_w // 3))))
    try:
        check_mask_config(**setup)
    except MaskConfigError:
        assume(False)
    return setup


def _rectangle(idx: torch.Tensor, grid_w: int) -> tuple[int, int]:
    """(h, w) of the block idx covers; fails unless idx is exactly a full axis-aligned rectangle."""
    rows, cols = (idx // grid_w).tolist(), (idx % grid_w).tolist()
    h, w = max(rows) - min(rows) + 1, max(cols) - min(cols) + 1
    assert len(set(idx.tolist())) == len(idx) == h * w
    return h, w


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(setup=mask_setups(), batch=st.integers(1, 6), seed=st.integers(0, 2**31 - 1))
def test_masks_never_overlap_and_respect_the_configured_sizes(setup: dict[str, Any], batch: int, seed: int) -> None:
    sampler = MaskSampler(**setup)
    masks = sampler.sample(batch, torch.Generator().manual_seed(seed))
    gh, gw, k = setup["grid_h"], setup["grid_w"], setup["num_targets"]
    (s0, s1), (a0, a1) = setup["target_scale"], setup["target_aspect"]
    (_, cs1), (ca0, ca1) = setup["context_scale"], setup["context_aspect"]
    ctx, tgt = masks.context_idx, masks.target_idx
    assert ctx.dtype == tgt.dtype == torch.int64
    assert ctx.shape[0] == tgt.shape[0] == batch and tgt.shape[1] == k
    assert ctx.shape[1] >= setup["min_keep"]
    for index in (ctx, tgt):
        assert int(index.min()) >= 0 and int(index.max()) < gh * gw
    # Block sizes are monotone in scale and aspect (h grows with both, w with scale and against aspect), so
    # every target's h x w lies between the sizes at the corners of the configured box, and fits the grid.
    h_range = (block_size(s0, a0, gh, gw)[0], block_size(s1, a1, gh, gw)[0])
    w_range = (block_size(s0, a1, gh, gw)[1], block_size(s1, a0, gh, gw)[1])
    ctx_h_max = min(block_size(cs1, ca1, gh, gw)[0], gh)
    ctx_w_max = min(block_size(cs1, ca0, gh, gw)[1], gw)
    for b in range(batch):
        context = set(ctx[b].tolist())
        assert ctx[b].tolist() == sorted(context)  # sorted, no duplicates
        rows, cols = [i // gw for i in context], [i % gw for i in context]
        assert max(rows) - min(rows) + 1 <= ctx_h_max and max(cols) - min(cols) + 1 <= ctx_w_max
        for t in range(k):
            h, w = _rectangle(tgt[b, t], gw)
            assert h_range[0] <= h <= h_range[1] and w_range[0] <= w <= w_range[1], (h, w, h_range, w_range)
            assert h <= gh and w <= gw
            assert not context & set(tgt[b, t].tolist())  # the context never sees a target patch


# ================================================================================ regressions the properties found
def test_control_characters_in_strings_round_trip_through_config_toml(tmp_path: Path) -> None:
    # config_to_toml escaped only "\n": a "\r", "\x00" or "\x7f" went out raw, which TOML forbids, so the run's
    # config.toml could not be loaded again (--resume).
    cfg = preset("tiny")
    cfg.data.path = "a\rb\x00c\x7fd\te\x1b[2J\"\\"
    cfg.rules.non_finite_metrics = "loss,\u2028grad_norm"
    path = tmp_path / "config.toml"
    path.write_text(config_to_toml(cfg), encoding="utf-8")
    assert load_config(path) == cfg


def test_set_text_that_is_not_unicode_is_rejected_naming_the_key() -> None:
    # Command-line bytes that are not UTF-8 arrive as lone surrogates; config.toml could not be written.
    with pytest.raises(ConfigError, match=r"data.path: .* is not valid Unicode text"):
        apply_overrides(preset("tiny"), ["data.path=/data/\udcff"])
    cfg = preset("tiny")
    cfg.data.path = "/data/\udcff"
    with pytest.raises(ConfigError, match=r"data.path: .* is not valid Unicode text"):
        validate_config(cfg)


def test_set_value_followed_by_more_toml_is_rejected() -> None:
    # "v = 1e-3\n[model]\n..." parsed as TOML set the value and silently dropped the rest.
    with pytest.raises(ConfigError, match=r"--set 'optim.lr=1e-3\\n\[model\]\\nembed_dim = 8': expected one value"):
        apply_overrides(preset("tiny"), ["optim.lr=1e-3\n[model]\nembed_dim = 8"])


def test_unknown_preset_in_a_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('preset = "huge"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: unknown preset 'huge'"):
        load_config(path)
