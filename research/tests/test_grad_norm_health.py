"""research/grad_norm_health.py: the ratios it counts are the divergence rule's own (a reading against the level
before it), and a run counts only when the ratio holds for the readings asked."""

from __future__ import annotations

from research_util import load_research

from jepa_core.config.rules import RulesConfig


def test_a_streak_must_hold_for_the_readings_asked():
    health = load_research("grad_norm_health")
    ratios = [(10, 1.0), (20, 2.2), (30, 1.9), (40, 2.1), (50, 2.6), (60, 1.0)]
    assert health.first_run(ratios, 2.0, 1) == 20
    assert health.first_run(ratios, 2.0, 2) == 50  # 2.2 then 1.9 breaks the streak
    assert health.first_run(ratios, 2.0, 3) is None
    assert health.first_run(ratios, 1.5, 4) == 50


def test_a_jump_reads_against_the_level_before_it():
    health = load_research("grad_norm_health")
    cfg = RulesConfig()
    steady = [{"step": cfg.divergence_warmup_steps + 10 * i, "grad_norm": 1.0} for i in range(cfg.min_readings + 5)]
    jump = {"step": steady[-1]["step"] + 10, "grad_norm": 3.0}
    ratios = health.level_ratios([{"step": 0, "grad_norm": 50.0}, *steady, jump], cfg)  # step 0: before warm-up
    assert ratios[-1] == (jump["step"], 3.0)
    assert all(abs(r - 1.0) < 1e-9 for _, r in ratios[:-1])
    assert len(ratios) == len(steady) + 1 - cfg.min_readings
