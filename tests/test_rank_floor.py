"""rank_collapse's floor against the features' width, how the width reaches the rules (trainer, doctor, replay),
and the fixed-batch trend's wait for a span of readings (both since round 20)."""

from __future__ import annotations

import json
import random

import pytest

from jepa_core.alerts.clock import REFERENCE_CLOCK, RunClock
from jepa_core.alerts.detectors import TrendBreak
from jepa_core.alerts.engine import RuleEngine, evaluate_rows
from jepa_core.config import RulesConfig, apply_overrides, preset, save_config
from jepa_core.method.schedules import LrSchedule
from jepa_core.metrics.stream import encode_row
from jepa_core.workbench.doctor import diagnose, format_report, run_facts, run_feature_dim

WIDTH = 96
TOKEN = "target/token_effective_rank"


def token_rank_run(levels: dict[int, float], every: int = 20, steps: int = 400) -> list[dict]:
    """Rows with only the token rank (every `every` steps): `levels` maps a step to the rank from there on."""
    rng = random.Random(0)
    rows, level = [], 40.0
    for step in range(0, steps + 1, every):
        level = next((v for s, v in sorted(levels.items(), reverse=True) if step >= s), level)
        rows.append({"step": step, TOKEN: level * (1 + rng.gauss(0.0, 0.01))})
    return rows


def floor_alerts(rows: list[dict], cfg: RulesConfig | None = None, width: int | None = WIDTH) -> list:
    return [a for a in evaluate_rows(rows, cfg, width) if a.rule == "rank_collapse"]


def test_a_reading_the_trend_already_alerts_on_gets_one_alert_and_the_episode_stays_quiet() -> None:
    # The rank halves at step 280 and falls to 5 of 96 dimensions at 300: the trend alerts at 300, and the floor,
    # true from the same reading, adds no second alert then, nor later in the same episode.
    rows = token_rank_run({0: 40.0, 280: 20.0, 300: 5.0})
    alerts = floor_alerts(rows)
    assert [a.step for a in alerts] == [300] and "faster than its own trend" in alerts[0].message
    # A drop straight to 5 is one reading of the trend's: the floor's alert, at once.
    alerts = floor_alerts(token_rank_run({0: 40.0, 300: 5.0}))
    assert [a.step for a in alerts] == [300] and "% of the features'" in alerts[0].message


def test_a_rank_that_reaches_the_floor_slowly_is_caught_by_the_floor_alone() -> None:
    # A fall at a steady pace from the first reading: the trend learns it as the pace (no break), the floor does not.
    rows = [{"step": s, TOKEN: 40.0 * 0.992 ** s} for s in range(0, 401, 20)]
    trend_only = floor_alerts(rows, RulesConfig(rank_floor_fraction=0.0))
    assert trend_only == []
    alerts = floor_alerts(rows)
    first_below = next(r["step"] for r in rows if r["step"] >= REFERENCE_CLOCK.readings(RulesConfig().settle_readings)
                       and r[TOKEN] < RulesConfig().rank_floor_fraction * WIDTH)
    assert [a.step for a in alerts] == [first_below]


def test_above_the_floor_without_a_width_or_turned_off_nothing_fires() -> None:
    # Down to 14 of 96 (14.6%: as low as any healthy run of the library went), at a pace that slows
    rows = [{"step": s, TOKEN: 14.0 + 26.0 * 0.99 ** s} for s in range(0, 401, 20)]
    assert rows[-1][TOKEN] < 14.5 and floor_alerts(rows) == []
    slow = [{"step": s, TOKEN: 40.0 * 0.992 ** s} for s in range(0, 401, 20)]
    assert floor_alerts(slow, width=None) == []
    assert floor_alerts(slow, RulesConfig(rank_floor_fraction=0.0)) == []
    assert floor_alerts(slow, width=0) == []


def test_the_floor_rearms_after_clear_readings() -> None:
    cfg = RulesConfig(trend_break=1000.0)  # the floor alone
    low, high = {"step": 0, TOKEN: 7.0}, {"step": 0, TOKEN: 11.0}
    steps = range(100, 100 + 20 * (3 + cfg.rearm_readings + 1), 20)
    pattern = [low] * 3 + [high] * cfg.rearm_readings + [low]
    rows = [dict(r, step=s) for r, s in zip(pattern, steps)]
    alerts = floor_alerts(rows, cfg)
    assert [a.step for a in alerts] == [100, rows[-1]["step"]]


def test_the_floor_fraction_is_validated() -> None:
    with pytest.raises(ValueError, match="rules.rank_floor_fraction"):
        RulesConfig(rank_floor_fraction=1.0).validate()
    with pytest.raises(ValueError, match="rules.rank_floor_fraction"):
        RulesConfig(rank_floor_fraction=-0.1).validate()


def test_the_engine_keeps_the_width_it_was_given() -> None:
    assert RuleEngine(RulesConfig(), feature_dim=80).feature_dim == 80
    assert RuleEngine().feature_dim is None


def test_the_trainers_rules_know_the_models_width(tmp_path) -> None:
    from jepa_core.run.trainer import Trainer  # noqa: PLC0415 (torch)

    cfg = apply_overrides(preset("tiny"), [f"logging.runs_dir={json.dumps(str(tmp_path))}", "model.embed_dim=64",
                                           "data.num_train=64", "data.num_heldout=64", "optim.steps=2",
                                           "optim.warmup_steps=1"])
    trainer = Trainer(cfg, run_dir=tmp_path / "run", quiet=True)
    try:
        assert trainer.rules.feature_dim == 64
    finally:
        trainer.close()


def write_run(tmp_path, rows: list[dict], embed_dim: int | None) -> object:
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(encode_row(r) + "\n" for r in rows))
    if embed_dim is not None:
        save_config(apply_overrides(preset("tiny"), [f"model.embed_dim={embed_dim}"]), run / "config.toml")
    return run


def test_the_doctor_reads_the_width_from_the_runs_config(tmp_path) -> None:
    rows = [{"step": s, TOKEN: 40.0 * 0.992 ** s} for s in range(0, 401, 20)]
    run = write_run(tmp_path, rows, embed_dim=WIDTH)
    assert run_feature_dim(run) == WIDTH
    report = diagnose(run)
    assert report.feature_dim == WIDTH and report.to_dict()["feature_dim"] == WIDTH
    assert [a.rule for a in report.alerts] == ["rank_collapse"] and report.verdict == "warning"
    assert "rank floor is off" not in format_report(report)


def test_without_a_config_the_doctor_says_the_floor_is_off(tmp_path) -> None:
    rows = [{"step": s, TOKEN: 40.0 * 0.992 ** s} for s in range(0, 401, 20)]
    run = write_run(tmp_path, rows, embed_dim=None)
    report = diagnose(run)
    assert report.feature_dim is None and report.verdict == "healthy"
    assert "no readable config.toml beside the stream: the rank floor is off" in format_report(report)
    (run / "config.toml").write_text("[model\nembed_dim = ")  # a damaged config: the stream is still judged
    assert run_feature_dim(run) is None and diagnose(run).verdict == "healthy"
    assert "no readable config.toml" in format_report(diagnose(run))


def test_the_doctor_judges_with_the_runs_own_rules_when_asked(tmp_path, capsys) -> None:
    # A user whose encoder's healthy tokens span few directions lowers the floor in their run's [rules]: today's
    # rules warn on it, the run's own do not (`jepa doctor RUN --rules run`).
    from jepa_core.workbench.doctor import doctor_main, run_rules  # noqa: PLC0415

    rows = [{"step": s, TOKEN: 40.0 * 0.992 ** s} for s in range(0, 401, 20)]
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(encode_row(r) + "\n" for r in rows))
    save_config(apply_overrides(preset("tiny"), [f"model.embed_dim={WIDTH}", "rules.rank_floor_fraction=0.01"]),
                run / "config.toml")
    assert run_rules(run).rank_floor_fraction == 0.01
    today, own = diagnose(run), diagnose(run, own_rules=True)
    assert (today.verdict, today.rules) == ("warning", "today") and [a.rule for a in today.alerts] == ["rank_collapse"]
    assert (own.verdict, own.rules, own.alerts) == ("healthy", "run", [])
    assert "judged with the thresholds in the run's own config.toml ([rules])" in format_report(own)
    assert "judged with this version's default rules (add --rules run to judge with the thresholds in the " \
        "run's config.toml)" in format_report(today)
    assert doctor_main([str(run)]) == 1 and doctor_main([str(run), "--rules", "run"]) == 0
    assert doctor_main([str(run), "--rules", "run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["rules"] == "run"
    # No config, or one that does not load: exit 2 naming the file, before judging anything.
    (run / "config.toml").write_text("[rules]\nno_such_threshold = 1\n")
    assert doctor_main([str(run), "--rules", "run"]) == 2
    assert "config.toml: the run's own rules do not load" in capsys.readouterr().err
    (run / "config.toml").unlink()
    assert doctor_main([str(run), "--rules", "run"]) == 2
    err = capsys.readouterr().err
    assert "config.toml: not found, so the run's own rules are unknown" in err
    assert doctor_main([str(run)]) == 0  # today's rules, no floor without the width


# ------------------------------------------------------------------------------ the fixed-batch trend's span


def test_a_trend_waits_for_its_readings_to_span_the_steps_asked() -> None:
    # Readings every 30 steps that fall sharply from the third on: with no span asked the CUSUM adds from the third
    # innovation; asked for 100 steps, nothing before the readings span 100 steps.
    def feed(detector: TrendBreak) -> dict[int, float]:
        totals = {}
        for i, step in enumerate(range(60, 400, 30)):
            detector.update(step, -0.001 * step - (0.25 * (i - 2) if i >= 2 else 0.0))
            totals[step] = detector.total
        return totals

    eager = feed(TrendBreak(20, 50, 2.0, 4.0, min_innovations=2))
    patient = feed(TrendBreak(20, 50, 2.0, 4.0, min_innovations=2, min_span_steps=100))
    assert eager[150] > 0 and patient[150] == 0.0  # the third innovation, 90 steps after the first reading
    assert patient[180] > 0  # 120 steps: judged
    assert max(eager.values()) >= 4.0 > max(patient.values())  # the early readings were what reached the threshold


def test_a_trend_whose_first_reading_is_at_step_0_measures_its_span_from_there() -> None:
    # With rules.settle_readings = 0 the first reading is at step 0: the span counts from it (a falsy 0 must not
    # restart it at every reading, which would keep the trend from ever judging).
    detector = TrendBreak(20, 50, 2.0, 4.0, min_innovations=2, min_span_steps=100)
    totals = {}
    for i, step in enumerate(range(0, 300, 30)):
        detector.update(step, -0.001 * step - (0.25 * (i - 2) if i >= 2 else 0.0))
        totals[step] = detector.total
    assert totals[90] == 0.0 and max(totals.values()) > 0


def test_the_doctor_gives_online_collapse_the_runs_lr_warm_up(tmp_path) -> None:
    # The online spread falls to a tenth of the target's at step 120 and stays there: within 2.25 lr warm-ups of the
    # tiny preset's (80 steps, so judged from 180) the doctor, which reads the warm-up from config.toml, is silent;
    # without the config the fall is judged, and the report says the wait is off.
    rows = [{"step": s, "target/fixed_batch_std_mean": 0.6,
             "online/fixed_batch_std_mean": 0.42 if s < 120 else 0.06} for s in range(0, 401, 20)]
    run = write_run(tmp_path, rows, embed_dim=WIDTH)
    # the probe-val half of the tiny preset's 4096 held-out shapes: eval_regression's binomial noise on old streams
    assert run_facts(run) == {"feature_dim": WIDTH, "lr_schedule": LrSchedule.of(preset("tiny").optim),
                              "eval_count": 2048, "clock": RunClock.of(preset("tiny"))}
    assert run_facts(run)["lr_schedule"].warmup_steps == 80
    assert diagnose(run).alerts == []
    (run / "config.toml").unlink()
    report = diagnose(run)
    assert [(a.rule, a.step) for a in report.alerts] == [("online_collapse", 120)]
    assert "online_collapse does not wait out the lr warm-up" in format_report(report)
    assert "without the lr schedule's own growth" in format_report(report)
