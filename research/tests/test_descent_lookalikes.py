"""research/descent_lookalikes.py: a miss is set against healthy runs that moved at least as far in every signal
over a span of the same length; on the recorded library, the test split's missed collapses have such a healthy
lookalike and a tuning-split collapse caught late has none."""

from __future__ import annotations

import pytest
from research_util import load_research


def _rows(fall: float, rank_fall: float, steps: int = 300) -> list[dict]:
    """A run whose spreads fall linearly by `fall` of their start over its length, and its ranks by `rank_fall`."""
    rows = []
    for s in range(0, steps + 1, 10):
        t = s / steps
        row = {"step": s, "target/std_mean": 1.0 - fall * t, "target/fixed_batch_std_mean": 0.9 * (1.0 - fall * t),
               "target/token_effective_rank": 40.0 * (1 - rank_fall * t), "target/effective_rank": 8.0,
               "loss": 0.4 * (1.0 - fall * t), "pred_target/cosine": 0.5 + 0.3 * t}
        rows.append(row)
    return rows


def test_a_signature_holds_every_fall_the_cosine_rise_and_the_depth_below_the_peak():
    looks = load_research("descent_lookalikes")
    moved = looks.signature(_rows(0.6, 0.3), 300, 150)
    assert moved["fixed-batch spread"] == pytest.approx(1 - 0.4 / 0.7)
    assert moved["per-batch spread"] == pytest.approx(1 - 0.4 / 0.7)
    assert moved["token rank"] == pytest.approx(1 - 0.7 / 0.85)
    assert moved["pooled rank"] == 0.0
    assert moved["cosine rise"] == pytest.approx(0.15)
    assert moved["depth below peak"] == pytest.approx(0.6)  # against its first reading, the highest


def test_a_healthy_run_dominates_only_when_it_moved_as_far_in_every_signal():
    looks = load_research("descent_lookalikes")
    miss = looks.signature(_rows(0.5, 0.3), 300, 150)
    assert looks.dominates(looks.signature(_rows(0.6, 0.3), 300, 150), miss)
    assert not looks.dominates(looks.signature(_rows(0.6, 0.2), 300, 150), miss)  # its rank fell less
    assert not looks.dominates({k: v for k, v in miss.items() if k != "loss"}, miss)  # a signal it lacks
    assert not looks.dominates({"loss": 1.0}, {})  # nothing to compare is no lookalike
    # The first reading whose last 150 steps dominate: a faster healthy descent gets there before its end.
    assert looks.first_lookalike(_rows(0.9, 0.5), miss, 150) is not None
    assert looks.first_lookalike(_rows(0.3, 0.5), miss, 150) is None


def _case(key: str) -> list[dict]:
    library = load_research("library")
    return library.load_case(library.LIBRARY / key)[1]


@pytest.mark.parametrize("miss, onset, harm, healthy", [
    ("flatlr/collapse_0.38_at130_s51", 130, 220, "shallow/healthy_s54"),
    ("thinpred/collapse_0.45_at110_s0", 110, 220, "quick/healthy_s11"),
    ("thinpred/collapse_1.4_at110_s1", 110, 220, "momentum/healthy_s32"),
    ("thinpred/collapse_0.45_at110_s55", 110, 220, "shallow/healthy_s0"),
])
def test_the_test_splits_missed_collapses_have_a_healthy_lookalike(miss, onset, harm, healthy):
    looks = load_research("descent_lookalikes")
    span = harm - onset
    moved = looks.signature(_case(miss), harm, span)
    assert len(moved) == 7
    assert looks.first_lookalike(_case(healthy), moved, span) is not None


def test_a_collapse_deeper_than_any_healthy_descent_has_no_lookalike():
    looks = load_research("descent_lookalikes")
    moved = looks.signature(_case("shallow/collapse_0.22_at165_s0"), 231, 66)
    assert moved["depth below peak"] > 0.8
    for healthy in ("shallow/healthy_s54", "shallow/healthy_s38", "quick/healthy_s11"):
        assert looks.first_lookalike(_case(healthy), moved, 66) is None
