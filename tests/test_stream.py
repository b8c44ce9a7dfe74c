"""The metric stream contract (design §5): strict JSON, non-finite round trip, torn lines, resume purge, following."""

from __future__ import annotations

import gzip
import json
import math
import os

import numpy as np
import pandas as pd
import pytest
import torch

from jepa_core.metrics.stream import JsonlWriter, apply_resume_purge, decode_row, encode_row, iter_rows

from jepa_core.metrics.follower import MetricsFollower

from jepa_core.metrics.reader import read_metrics


def _reject_constant(token: str) -> float:
    raise ValueError(f"non-strict JSON token {token}")


def strict_loads(line: str) -> dict:
    return json.loads(line, parse_constant=_reject_constant)


def write_rows(path, rows, attempt=1):
    with JsonlWriter(path, attempt=attempt) as writer:
        for row in rows:
            writer.write(row)


# ---------------------------------------------------------------------------------------------- encoding
def test_encode_row_is_strict_json_with_non_finite_as_strings():
    line = encode_row({"step": 3, "loss": math.nan, "grad_norm": math.inf, "x": -math.inf, "lr": 1e-3})
    assert "\n" not in line
    parsed = strict_loads(line)  # raises on NaN / Infinity tokens
    assert parsed == {"step": 3, "loss": "NaN", "grad_norm": "Infinity", "x": "-Infinity", "lr": 1e-3}


def test_encode_row_converts_tensors_and_numpy_scalars():
    line = encode_row({"step": np.int64(4), "a": torch.tensor(0.5), "b": np.float32(2.0), "c": torch.tensor(math.nan),
                       "d": np.bool_(True)})
    parsed = strict_loads(line)
    assert parsed == {"step": 4, "a": 0.5, "b": 2.0, "c": "NaN", "d": True}
    assert type(parsed["step"]) is int


def test_encode_row_rejects_unencodable_value_naming_key():
    with pytest.raises(TypeError, match="'weird'"):
        encode_row({"step": 1, "weird": object()})


def test_decode_row_restores_non_finite_but_not_text_fields():
    row = decode_row('{"step":1,"loss":"NaN","g":"-Infinity","event":"alert","message":"NaN","value":"Infinity"}')
    assert math.isnan(row["loss"]) and row["g"] == -math.inf and row["value"] == math.inf
    assert row["message"] == "NaN"


@pytest.mark.parametrize("line, reason", [("{bad", "invalid JSON"), ("[1,2]", "not a JSON object"),
                                          ('{"loss": 1}', "missing integer 'step'"),
                                          ('{"step": "3"}', "'step' is not an integer")])
def test_decode_row_errors_say_why(line, reason):
    with pytest.raises(ValueError, match=reason):
        decode_row(line)


# ---------------------------------------------------------------------------------------------- writer
def test_writer_lines_are_strict_and_carry_attempt(tmp_path):
    path = tmp_path / "metrics.jsonl"
    write_rows(path, [{"step": 0, "loss": math.nan}, {"step": 1, "loss": 0.5}], attempt=2)
    lines = path.read_text().splitlines()
    assert [strict_loads(line)["attempt"] for line in lines] == [2, 2]
    assert path.read_bytes().endswith(b"\n")


def test_writer_requires_integer_step(tmp_path):
    with JsonlWriter(tmp_path / "m.jsonl", attempt=0) as writer:
        with pytest.raises(ValueError, match="integer 'step'"):
            writer.write({"loss": 1.0})
        with pytest.raises(ValueError, match="attempt"):
            writer.write({"step": 1, "attempt": 7})


def test_writer_is_flushed_per_row_without_close(tmp_path):
    path = tmp_path / "m.jsonl"
    writer = JsonlWriter(path, attempt=0)
    writer.write({"step": 0, "loss": 1.0})
    assert len(path.read_text().splitlines()) == 1  # visible to a reader before close
    writer.fsync()
    writer.close()


def test_writer_terminates_a_torn_tail_before_appending(tmp_path):
    path = tmp_path / "m.jsonl"
    write_rows(path, [{"step": 0, "loss": 1.0}], attempt=1)
    with open(path, "a") as handle:
        handle.write('{"step":1,"lo')  # crash mid-write
    write_rows(path, [{"step": 1, "loss": 0.9}], attempt=2)
    table = read_metrics(path)
    assert table.scalars["step"].tolist() == [0, 1]
    assert table.scalars["loss"].tolist() == [1.0, 0.9]
    assert table.bad_lines and table.bad_lines[0][0] == 2


# ---------------------------------------------------------------------------------------------- reader
def test_nan_and_inf_losses_round_trip_as_floats(tmp_path):
    path = tmp_path / "m.jsonl"
    write_rows(path, [{"step": 0, "loss": 1.0}, {"step": 1, "loss": math.nan}, {"step": 2, "loss": math.inf},
                      {"step": 3, "loss": -math.inf}])
    scalars = read_metrics(path).scalars
    assert scalars["loss"].dtype == np.float64
    loss = scalars["loss"].to_numpy()
    assert loss[0] == 1.0 and math.isnan(loss[1]) and loss[2] == math.inf and loss[3] == -math.inf
    rows = list(iter_rows(path))
    assert math.isnan(rows[1]["loss"]) and rows[2]["loss"] == math.inf


def test_sparse_rows_give_nan_gaps_and_typed_columns(tmp_path):
    path = tmp_path / "m.jsonl"
    write_rows(path, [{"step": s, "loss": 1.0 / (s + 1), **({"target/std_mean": 0.2} if s % 2 == 0 else {})}
                      for s in range(4)])
    scalars = read_metrics(path).scalars
    assert list(scalars.columns[:2]) == ["step", "attempt"]
    assert scalars["step"].dtype == np.int64 and scalars["attempt"].dtype == np.int64
    std = scalars["target/std_mean"].to_numpy()
    assert std[0] == 0.2 and math.isnan(std[1]) and std[2] == 0.2


def test_metric_columns_come_in_the_order_of_the_line_that_first_holds_each(tmp_path):
    # Lines 0 and 2 share a length bucket, line 1 (long) does not: the scan decodes line 2 before line 1, and the
    # columns still come in file order, the order a live table fed a line at a time has (test_runs.py).
    path = tmp_path / "m.jsonl"
    write_rows(path, [{"step": 0, "a": 1.0}, {"step": 1, "b": 2.0, "padding/" + "x" * 80: 0.0}, {"step": 2, "c": 3.0}])
    assert list(read_metrics(path).scalars.columns) == ["step", "attempt", "a", "b", "padding/" + "x" * 80, "c"]


def test_torn_final_line_is_skipped_and_counted(tmp_path):
    path = tmp_path / "m.jsonl"
    write_rows(path, [{"step": 0, "loss": 1.0}, {"step": 1, "loss": 0.9}])
    with open(path, "a") as handle:
        handle.write('{"step":2,"loss":0.')
    table = read_metrics(path)
    assert table.scalars["step"].tolist() == [0, 1]
    assert table.torn_lines == 1
    assert table.bad_lines == []
    assert [r["step"] for r in iter_rows(path)] == [0, 1]


def test_garbage_in_the_middle_is_reported_with_line_number(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"step":0,"loss":1.0}\n'
                    '{"step":1,"loss":0.9}\n'
                    'this is not json\n'
                    '[1, 2]\n'
                    '\n'
                    '{"loss":0.7}\n'
                    '{"step":4,"loss":0.6}\n')
    table = read_metrics(path)
    assert table.scalars["step"].tolist() == [0, 1, 4]
    assert [n for n, _ in table.bad_lines] == [3, 4, 6]
    reasons = dict(table.bad_lines)
    assert "invalid JSON" in reasons[3] and "not a JSON object" in reasons[4] and "step" in reasons[6]
    assert table.torn_lines == 3


def test_bad_line_numbers_are_right_across_read_chunks(tmp_path):
    path = tmp_path / "m.jsonl"
    lines = [encode_row({"step": s, "attempt": 1, "loss": 0.5}) for s in range(300)]
    lines[217] = "garbage"
    path.write_text("\n".join(lines) + "\n")
    table = read_metrics(path, chunk_bytes=256)  # many small chunks
    assert table.bad_lines[0][0] == 218
    assert len(table.scalars) == 299


def test_resumed_run_has_no_duplicated_or_orphaned_steps(tmp_path):
    path = tmp_path / "m.jsonl"
    write_rows(path, [{"step": s, "loss": 1.0} for s in range(51)], attempt=1)
    write_rows(path, [{"step": 40, "event": "alert", "rule": "r", "severity": "warning", "metric": "loss",
                       "value": 2.0, "message": "orphan"}], attempt=1)
    write_rows(path, [{"step": s, "loss": 2.0} for s in range(31, 61)], attempt=2)
    table = read_metrics(path)
    steps = table.scalars["step"].tolist()
    assert steps == list(range(61))
    assert set(table.scalars.loc[table.scalars["step"] <= 30, "attempt"]) == {1}
    assert set(table.scalars.loc[table.scalars["step"] >= 31, "attempt"]) == {2}
    assert table.alerts.empty  # the alert at step 40 belonged to the superseded attempt
    assert [r["step"] for r in iter_rows(path)] == list(range(61))


def test_apply_resume_purge_on_rows_and_frames_with_three_attempts():
    rows = ([{"step": s, "attempt": 1} for s in range(10)] + [{"step": s, "attempt": 2} for s in range(5, 8)]
            + [{"step": s, "attempt": 3} for s in range(7, 12)])
    kept = apply_resume_purge(rows)
    assert [(r["step"], r["attempt"]) for r in kept] == ([(s, 1) for s in range(5)] + [(5, 2), (6, 2)]
                                                         + [(s, 3) for s in range(7, 12)])
    frame = apply_resume_purge(pd.DataFrame(rows))
    assert list(zip(frame["step"], frame["attempt"])) == [(r["step"], r["attempt"]) for r in kept]


def test_alerts_and_events_frames(tmp_path):
    path = tmp_path / "m.jsonl"
    write_rows(path, [{"step": 0, "loss": 1.0},
                      {"step": 1, "event": "alert", "rule": "non_finite", "severity": "critical", "metric": "loss",
                       "value": math.nan, "message": "loss is NaN"},
                      {"step": 2, "event": "checkpoint", "path": "checkpoints/step_0000002.pt"}])
    table = read_metrics(path)
    assert list(table.alerts.columns) == ["step", "attempt", "rule", "severity", "metric", "value", "message"]
    assert table.alerts["rule"].tolist() == ["non_finite"] and math.isnan(table.alerts["value"].iloc[0])
    assert table.events["event"].tolist() == ["checkpoint"]
    assert table.events["path"].tolist() == ["checkpoints/step_0000002.pt"]
    assert table.scalars["step"].tolist() == [0]


def test_empty_file_reads_as_empty_frames(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text("")
    table = read_metrics(path)
    assert table.scalars.empty and list(table.scalars.columns) == ["step", "attempt"]
    assert table.alerts.empty and table.events.empty and table.torn_lines == 0


def test_non_numeric_metric_values_are_left_out_of_scalars(tmp_path):
    path = tmp_path / "m.jsonl"
    write_rows(path, [{"step": 0, "loss": 1.0, "note": "hello"}, {"step": 1, "loss": 0.5, "note": "x"}])
    scalars = read_metrics(path).scalars
    assert "note" not in scalars.columns and scalars["loss"].tolist() == [1.0, 0.5]


# ---------------------------------------------------------------------------------------------- follower
def test_follower_returns_only_new_rows_and_buffers_partial_line(tmp_path):
    path = tmp_path / "m.jsonl"
    follower = MetricsFollower(path)
    assert follower.poll() == []  # no file yet
    write_rows(path, [{"step": 0, "loss": 1.0}, {"step": 1, "loss": math.nan}])
    rows = follower.poll()
    assert [r["step"] for r in rows] == [0, 1] and math.isnan(rows[1]["loss"])
    assert follower.poll() == []
    with open(path, "a") as handle:
        handle.write('{"step":2,"attempt":1,"lo')
    assert follower.poll() == []  # partial line held back
    with open(path, "a") as handle:
        handle.write('ss":0.5}\n{"step":3,"attempt":1,"loss":0.4}\n')
    assert [(r["step"], r["loss"]) for r in follower.poll()] == [(2, 0.5), (3, 0.4)]
    assert follower.offset == os.path.getsize(path)


def test_follower_starts_over_when_file_is_replaced_or_truncated(tmp_path):
    path = tmp_path / "m.jsonl"
    write_rows(path, [{"step": s, "loss": 1.0} for s in range(5)])
    follower = MetricsFollower(path)
    assert len(follower.poll()) == 5
    path.unlink()
    write_rows(path, [{"step": 0, "loss": 3.0}])
    update = follower.poll_update()
    assert update.reset and [r["loss"] for r in update.rows] == [3.0]
    with open(path, "w"):
        pass  # truncated
    write_rows(path, [{"step": 9, "loss": 4.0}], attempt=1)
    update = follower.poll_update()
    assert [r["step"] for r in update.rows] == [9]


def test_follower_reports_resume_so_consumer_can_purge(tmp_path):
    path = tmp_path / "m.jsonl"
    write_rows(path, [{"step": s, "loss": 1.0} for s in range(10)], attempt=1)
    follower = MetricsFollower(path)
    seen = follower.poll()
    assert follower.purged_from_step is None
    write_rows(path, [{"step": s, "loss": 2.0} for s in range(6, 12)], attempt=2)
    update = follower.poll_update()
    assert update.purge_from_step == 6
    seen = apply_resume_purge(seen + update.rows)
    assert [r["step"] for r in seen] == list(range(12))
    assert [r["loss"] for r in seen] == [1.0] * 6 + [2.0] * 6


def test_follower_counts_bad_complete_lines(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"step":0}\nnot json\n{"step":1}\n')
    follower = MetricsFollower(path)
    assert [r["step"] for r in follower.poll()] == [0, 1]
    assert follower.bad_lines[0][0] == 2


# --------------------------------------------------------------------------------------------- fast reader vs reference
def _reference_scalars(path) -> pd.DataFrame:
    """What read_metrics must return, built the slow obvious way: strict json per line, purge, a dict per row."""
    rows = []
    for line in path.read_bytes().split(b"\n"):
        try:
            row = strict_loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and type(row.get("step")) is int and type(row.get("attempt", 0)) is int:
            rows.append(row)
    kept = [r for r in apply_resume_purge(rows) if "event" not in r]
    tokens = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
    numeric = [{k: float(tokens.get(v, v)) for k, v in r.items()
                if k not in ("step", "attempt") and (type(v) in (int, float, bool) or v in tokens)} for r in kept]
    frame = pd.DataFrame(numeric, index=range(len(kept)), dtype=np.float64)
    frame.insert(0, "attempt", np.array([r.get("attempt", 0) for r in kept], dtype=np.int64))
    frame.insert(0, "step", np.array([r["step"] for r in kept], dtype=np.int64))
    return frame


def _mixed_cadence_rows(count: int, start: int = 0):
    for step in range(start, start + count):
        row = {"step": step, "loss": 1.0 / (step + 1), "lr": step * 1e-5, "time/step_seconds": 0.25}
        if step % 7 == 0:
            row.update({"target/std_mean": 0.5, "target/effective_rank": float(step % 31), "mask/count": 12})
        if step % 50 == 0:
            row.update({"knn/accuracy": 0.25, "linear_probe/val_acc": 0.5})
        if step % 13 == 0:
            row["loss"] = [math.nan, math.inf, -math.inf][step % 3]
        yield row
        if step % 97 == 0:
            yield {"step": step, "event": "alert", "rule": "r", "severity": "warning", "metric": "loss",
                   "value": 1.0, "message": "NaN: look"}


def _resumed_stream_with_garbage(path):
    """2000 steps at mixed cadences over two attempts (the second resumes at 1400), a garbage line between them."""
    write_rows(path, _mixed_cadence_rows(1500), attempt=1)
    with open(path, "a") as handle:
        handle.write("garbage in the middle\n")
    write_rows(path, _mixed_cadence_rows(600, start=1400), attempt=2)
    return path


@pytest.mark.parametrize("chunk_bytes", [4096, 1 << 20])
def test_fast_reader_matches_row_by_row_reference(tmp_path, chunk_bytes):
    path = _resumed_stream_with_garbage(tmp_path / "m.jsonl")
    table = read_metrics(path, chunk_bytes=chunk_bytes)
    expected = _reference_scalars(path)
    pd.testing.assert_frame_equal(table.scalars, expected, check_like=True)
    assert table.scalars["step"].tolist() == list(range(2000))
    assert table.bad_lines == [(path.read_text().splitlines().index("garbage in the middle") + 1,
                                table.bad_lines[0][1])]
    assert table.alerts["step"].tolist() == [s for s in range(2000) if s % 97 == 0]
    assert table.alerts["attempt"].tolist() == [1 if s < 1400 else 2 for s in range(2000) if s % 97 == 0]


def test_odd_lines_inside_a_group_of_identical_rows_fall_back_correctly(tmp_path):
    path = tmp_path / "m.jsonl"
    lines = [encode_row({"step": s, "attempt": 1, "loss": 0.5, "lr": 0.25}) for s in range(40)]
    lines[5] = lines[5] + lines[6]  # two rows on one line: bad, not two rows
    lines[10] = '{"step":10.0,"attempt":1,"loss":0.5,"lr":0.25}'  # float step: bad
    lines[12] = '{"step":12,"attempt":1,"loss":"high","lr":0.25}'  # text value: left out, lr kept
    lines[14] = '{"step":14,"attempt":1,"loss":true,"lr":null}'
    lines[16] = '{"lr":0.75,"loss":0.125,"attempt":1,"step":16}'  # same keys, other order
    lines[18] = '{"step":%d,"attempt":1,"loss":0.5,"lr":0.25}' % (2**53 + 1)  # beyond float64 integers
    path.write_text("\n".join(lines) + "\n")
    table = read_metrics(path)
    assert [n for n, _ in table.bad_lines] == [6, 11]
    assert "invalid JSON" in table.bad_lines[0][1] and "'step' is not an integer" in table.bad_lines[1][1]
    frame = table.scalars.set_index("step")
    assert math.isnan(frame.loc[12, "loss"]) and frame.loc[12, "lr"] == 0.25
    assert frame.loc[14, "loss"] == 1.0 and math.isnan(frame.loc[14, "lr"])
    assert (frame.loc[16, "loss"], frame.loc[16, "lr"]) == (0.125, 0.75)
    assert 2**53 + 1 in frame.index and 5 not in frame.index and 10 not in frame.index
    assert len(frame) == 38


@pytest.mark.parametrize("odd_keys, even_keys", [(("ab", "cd"), ("ba", "dc")),  # same length and characters
                                                 (("layer1", "x"), ("layer2", "x"))])  # same once digits are gone
def test_key_sets_that_look_alike_are_read_apart(tmp_path, odd_keys, even_keys):
    path = tmp_path / "m.jsonl"
    rows = [{"step": s, **dict(zip(odd_keys if s % 2 else even_keys, (float(s), 1.0 if s % 2 else 2.0)))}
            for s in range(200)]
    path.write_text("".join(encode_row(r) + "\n" for r in rows))
    scalars = read_metrics(path).scalars
    pd.testing.assert_frame_equal(scalars, _reference_scalars(path), check_like=True)
    assert scalars.loc[3, odd_keys[0]] == 3.0 and scalars.loc[4, even_keys[0]] == 4.0
    assert math.isnan(scalars.loc[4, odd_keys[0]]) and math.isnan(scalars.loc[3, even_keys[0]])


def test_short_rows_blank_lines_crlf_and_long_lines(tmp_path):
    path = tmp_path / "m.jsonl"
    long_row = encode_row({"step": 3, **{f"metric_{i}": float(i) for i in range(50)}})
    path.write_bytes(b'{"step":0}\r\n\r\n{"step":1}\n\n{"step":2,"x":1}\r\n' + long_row.encode() + b"\n")
    table = read_metrics(path, chunk_bytes=64)  # the long line is bigger than a block
    assert table.scalars["step"].tolist() == [0, 1, 2, 3]
    assert table.scalars["metric_49"].tolist()[3] == 49.0 and table.bad_lines == []


def test_columns_grow_when_the_first_block_underestimates_the_line_count(tmp_path):
    path = tmp_path / "m.jsonl"
    wide = [{"step": s, **{f"k{i}": 1.0 for i in range(40)}} for s in range(20)]
    narrow = [{"step": s, "loss": float(s)} for s in range(20, 3000)]
    path.write_text("".join(encode_row(r) + "\n" for r in wide + narrow))
    scalars = read_metrics(path, chunk_bytes=2048).scalars
    assert scalars["step"].tolist() == list(range(3000))
    assert scalars["loss"].iloc[-1] == 2999.0 and scalars["k0"].iloc[19] == 1.0 and math.isnan(scalars["k0"].iloc[20])


def test_read_memory_stays_near_the_frame(tmp_path):
    import tracemalloc

    path = tmp_path / "m.jsonl"
    write_rows(path, ({"step": s, **{f"group/metric_{i}": s / (i + 1) for i in range(8)}} for s in range(20_000)))
    tracemalloc.start()
    try:
        table = read_metrics(path, chunk_bytes=256 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    frame_bytes = int(table.scalars.memory_usage(deep=False).sum())
    assert path.stat().st_size > 2 * frame_bytes  # the text alone would not fit the bound below
    assert peak < 1.5 * frame_bytes + 8 * 256 * 1024


# --------------------------------------------------------------------------------------------- an archived stream
def _archive(path, *parts: bytes):
    """`path` + ".gz": the parts gzipped one member each (one part: a plain `gzip metrics.jsonl`)."""
    archived = path.with_name(path.name + ".gz")
    archived.write_bytes(b"".join(gzip.compress(part) for part in parts))
    return archived


@pytest.mark.parametrize("chunk_bytes", [64, 4096, 1 << 20])
def test_an_archived_stream_reads_as_its_plain_file_reads(tmp_path, chunk_bytes):
    path = _resumed_stream_with_garbage(tmp_path / "m.jsonl")
    data = path.read_bytes()
    cut = data.index(b"\n", len(data) // 3) + 1
    for archived in (_archive(path, data), _archive(path, data[:cut], data[cut:])):  # one member, or two
        plain, packed = read_metrics(path, chunk_bytes=chunk_bytes), read_metrics(archived, chunk_bytes=chunk_bytes)
        pd.testing.assert_frame_equal(packed.scalars, plain.scalars)
        pd.testing.assert_frame_equal(packed.alerts, plain.alerts)
        assert packed.bad_lines == plain.bad_lines and len(packed.bad_lines) == 1
        assert list(iter_rows(archived, chunk_bytes)) == list(iter_rows(path, chunk_bytes))


def test_an_archive_cut_short_keeps_its_whole_lines_and_counts_the_torn_one(tmp_path):
    path = tmp_path / "m.jsonl"
    write_rows(path, [{"step": s, "attempt": 1, "loss": 1.0 / (s + 1)} for s in range(2000)])
    packed = gzip.compress(path.read_bytes())
    archived = tmp_path / "cut.jsonl.gz"
    archived.write_bytes(packed[: len(packed) // 2])  # a copy interrupted half way
    table = read_metrics(archived, chunk_bytes=4096)
    steps = table.scalars["step"].tolist()
    assert 0 < len(steps) < 2000 and steps == list(range(len(steps)))
    assert table.torn_lines == 1 and table.bad_lines == []
    assert [r["step"] for r in iter_rows(archived, 4096)] == steps


def test_bytes_that_are_not_gzip_under_a_gz_name_are_an_error_naming_the_file(tmp_path):
    archived = tmp_path / "m.jsonl.gz"
    archived.write_text(encode_row({"step": 1, "attempt": 1, "loss": 0.5}) + "\n")
    with pytest.raises(OSError, match=r"not a readable gzip stream") as raised:
        read_metrics(archived)
    assert raised.value.filename == str(archived)
