"""benchmarks/ijepa_step.py without the official clone: its refusal, and ours timed once (timings never asserted)."""

import time
from pathlib import Path

import torch

from benchmark_util import load_benchmark

bench = load_benchmark("ijepa_step")


def test_a_missing_clone_is_refused_by_name(tmp_path: Path, capsys):
    missing = tmp_path / "no-ijepa-here"
    assert bench.main(["--ijepa", str(missing)]) == 2
    assert str(missing) in capsys.readouterr().err
    assert bench.main([]) == 2  # no --ijepa at all


def test_self_check_times_our_step_alone(capsys):
    assert bench.main(["--self-check", "--batch-size", "4"]) == 0
    out = capsys.readouterr().out
    assert "threads 1: ours" in out and "official" not in out.split("\n", 2)[2]


def test_the_official_side_gets_the_same_masks_in_its_layout():
    w = bench.make_workload("tiny", 4, seed=0, mask_batches=2)
    k = w.cfg.masks.num_targets
    for mb in w.masks:
        masks_enc, masks_pred = bench.official_masks(mb)
        assert len(masks_enc) == 1 and torch.equal(masks_enc[0], mb.context_idx)
        assert len(masks_pred) == k
        assert all(torch.equal(p, mb.target_idx[:, i]) for i, p in enumerate(masks_pred))


def test_three_sides_are_interleaved_each_first_in_turn():
    calls: list[str] = []

    def side(name: str):
        return lambda i: calls.append(name) or time.sleep(0.001)  # a step that takes time: the ratios divide by it

    timing = bench.interleave(side("ours"), side("official"), 1, rounds=3, steps=1, warmup=0, blas=side("blas"))
    assert calls == ["ours", "official", "blas", "official", "blas", "ours", "blas", "ours", "official"]
    assert len(timing.ours_ms) == len(timing.official_ms) == len(timing.blas_ms) == 3
    assert "default products" in bench.report(timing)


def test_the_blas_side_computes_every_product_through_f_linear(monkeypatch):
    from jepa_core.method import linear

    calls = []
    real = linear._onednn_linear
    monkeypatch.setattr(linear, "_onednn_linear", lambda *a: calls.append(1) or real(*a))
    w = bench.make_workload("tiny", 2, seed=0, mask_batches=1)
    bench.our_step(w, 0, blas=True)(0)
    assert calls == []
    bench.our_step(w, 0)(0)
    assert calls
