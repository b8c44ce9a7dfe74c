"""research/distance_jumps.py: a jump is one reading against the one before it, of the same signal, after the
given step; a first reading of 0 (the target is a copy at step 0) or a non-finite one is no reference."""

from __future__ import annotations

from research_util import load_research

KEY = "ema/relative_param_l2"


def test_a_jump_is_a_reading_against_the_previous_one_after_the_given_step():
    jumps = load_research("distance_jumps")
    rows = [{"step": 0, KEY: 0.0}, {"step": 50, KEY: 0.1}, {"step": 100, KEY: 0.12}, {"step": 150, "loss": 1.0},
            {"step": 200, KEY: 0.3}, {"step": 250, KEY: 0.35}]
    assert jumps.first_jump(rows, KEY, 2.0, 0) == 200  # 0 -> 0.1 is no jump: a copy has no distance to grow from
    assert jumps.first_jump(rows, KEY, 2.5, 0) == 200  # 0.3 / 0.12
    assert jumps.first_jump(rows, KEY, 2.6, 0) is None
    assert jumps.first_jump(rows, KEY, 2.0, 200) is None  # only readings after step 200 count
    assert jumps.first_jump([{"step": 10, KEY: float("nan")}, {"step": 20, KEY: 0.1}, {"step": 30, KEY: 0.2}],
                            KEY, 2.0, 0) == 30


def test_the_largest_jump_is_the_largest_ratio_to_the_previous_reading():
    jumps = load_research("distance_jumps")
    rows = [{"step": 0, KEY: 0.0}, {"step": 50, KEY: 0.1}, {"step": 100, KEY: 0.25}, {"step": 150, KEY: 0.3}]
    assert jumps.largest_jump(rows, KEY, 0) == 2.5
    assert abs(jumps.largest_jump(rows, KEY, 100) - 1.2) < 1e-12  # only 150 is past 100
    assert jumps.largest_jump(rows[:1], KEY, 0) == 0.0


def test_per_lr_a_distance_that_grows_with_the_summed_lr_does_not_jump():
    # A linear warm-up from near 0: the lr summed to step s grows about as s squared, so a distance that follows it
    # reads 4x between steps 32 and 64 (round 37's healthy `slowlr`), and 1x once the schedule's growth is divided out.
    jumps = load_research("distance_jumps")
    optim = {"steps": 640, "warmup_steps": 100, "lr": 2.5e-4, "final_lr": 1e-5, "start_lr": 1e-9}
    sums = jumps.lr_sums(optim)
    assert len(sums) == 641 and sums[0] == 0.0 and sums[1] == 1e-9
    rows = [{"step": s, KEY: 1000 * sums[s]} for s in (32, 64, 96)]
    assert jumps.largest_jump(rows, KEY, 0) > 3.5  # what ema_runaway reads today
    assert abs(jumps.largest_jump(rows, KEY, 0, sums) - 1.0) < 1e-9
    # A blow-up on top of the schedule still jumps: the distance 3x what the schedule explains at 96.
    rows[2][KEY] *= 3
    assert abs(jumps.largest_jump(rows, KEY, 0, sums) - 3.0) < 1e-9
