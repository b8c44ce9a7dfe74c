"""benchmarks/throughput.py measures what it says on the trainer as it is today (it once called the step's loss with
an argument list the step had outgrown, and nothing noticed until a GPU was lent to run it)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from benchmark_util import load_benchmark


def _args(**overrides) -> argparse.Namespace:
    values = dict(steps=2, warmup=1, max_warmup=4, device="cpu", batch_size=16, phase_every=1, flop_batches=2,
                  peak_tflops=0.0)
    return argparse.Namespace(**{**values, **overrides})


def test_a_row_counts_flops_on_the_same_batches_and_splits_the_step_into_phases(tmp_path: Path) -> None:
    throughput = load_benchmark("throughput")
    first = throughput.measure("tiny", False, _args(), tmp_path / "a")
    again = throughput.measure("tiny", False, _args(steps=3), tmp_path / "b")
    assert first["batch"] == 16 and first["device"] == "cpu" and first["compile"] == "off"
    # The FLOP count reads fixed batches (not the ones after the timed steps), so a longer run counts the same.
    assert first["GFLOP/step"] > 0 and first["GFLOP/step"] == again["GFLOP/step"]
    assert first["MFU"] is None  # no bf16 peak on a CPU
    shares = [first[f"%{p}"] for p in throughput.PHASES]
    assert all(math.isfinite(s) and s >= 0 for s in shares) and 0.5 < sum(shares) <= 1.0 + 1e-9
    assert first["warm-up"].startswith("1 steps")


def test_the_flop_count_grows_with_the_batch(tmp_path: Path) -> None:
    throughput = load_benchmark("throughput")
    small = throughput.measure("tiny", False, _args(batch_size=8, steps=1), tmp_path / "a")
    large = throughput.measure("tiny", False, _args(batch_size=16, steps=1), tmp_path / "b")
    assert 1.8 < large["GFLOP/step"] / small["GFLOP/step"] < 2.2
