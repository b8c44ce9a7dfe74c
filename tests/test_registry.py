"""The metric registry (jepa_core.metrics.registry) against everything that logs, charts or judges a metric: what a
real training step emits, what the trainer and the evaluation add, the recorded runs, the charts and the doctor, the
rules' `watches`, the cadence keys and the alert columns."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from jepa_core.config import ModelConfig

from jepa_core.alerts.base import Alert
from jepa_core.alerts.rules import build_rules
from jepa_core.common import console
from jepa_core.config import CADENCE_KEYS, DiagnosticsConfig, RulesConfig
from jepa_core.method import step as step_mod
from jepa_core.method.masks import MaskSampler
from jepa_core.method.model import JEPA
from jepa_core.method.probes import score_features
from jepa_core.method.runtime import PHASES, PhaseTimer, phase_metrics
from jepa_core.metrics import instrument, registry
from jepa_core.metrics.instrument import Instrumentation
from jepa_core.metrics.stream import ALERT_COLUMNS
from jepa_core.run.control import ControlError, validate_control
from jepa_core.workbench import charts, doctor
from step_util import InstrumentedHooks

REPO = Path(__file__).resolve().parent.parent
NAMES = {m.name for m in registry.METRICS}


def required(groups: list[str]) -> set[str]:
    """The metrics every row of these groups carries (those with a `when` may be left out)."""
    return {m.name for g in groups for m in registry.in_group(g) if not m.when}


def test_a_real_training_step_emits_each_due_group_exactly_as_registered() -> None:
    torch.manual_seed(0)
    model = JEPA(ModelConfig(img_size=16, patch_size=4, in_chans=3, embed_dim=32, depth=1, num_heads=2, mlp_ratio=2.0,
                 pred_dim=16, pred_depth=1, pred_num_heads=2))
    state = step_mod.TrainState.plain(model, step_mod.build_optimizer(model, (0.9, 0.95)), batch_size=8)
    sampler = MaskSampler(4, 4, num_targets=2, target_scale=(0.15, 0.2), min_keep=2)
    # Different cadences, so a step where only some groups are due shows which group each metric belongs to.
    cadences = DiagnosticsConfig(basic_every_steps=1, representation_every_steps=2, fixed_batch_every_steps=4,
                                 covariance_every_steps=3, param_distance_every_steps=3, mask_check_every_steps=2,
                                 weights_health_every_steps=2)
    inst = Instrumentation(model, cadences, total_steps=6, device="cpu")
    assert set(inst.start_metrics()) == {m.name for m in registry.in_group("run_facts")}
    gen = torch.Generator().manual_seed(0)
    for step in range(1, 7):
        images = torch.randn(8, 3, 16, 16, generator=gen)
        settings = step_mod.StepSettings(step=step, lr=1e-3, wd=0.04, ema_tau=0.99)
        timer = PhaseTimer(torch.device("cpu"))
        out = step_mod.train_step(images, sampler.sample(8, gen), state, settings,
                                  InstrumentedHooks(inst, step, model, state.online, timer))
        due = inst.due_groups(step)
        metrics = inst.after_step(out, model, 0.1, 0.0)
        assert set(metrics) <= NAMES, f"step {step}: unregistered {sorted(set(metrics) - NAMES)}"
        assert {registry.metric(k).group for k in metrics} <= set(due), f"step {step}"
        assert required(due) <= set(metrics), f"step {step}: missing {sorted(required(due) - set(metrics))}"
        # What the trainer adds to the row: the phase timings.
        assert {registry.metric(k).group for k in phase_metrics(timer, 0.01)} == {"basic"}
    assert {f"time/{phase}_seconds" for phase in PHASES} <= NAMES


def test_what_the_trainer_and_the_evaluation_add_is_registered() -> None:
    # The trainer adds a few names to the instrumentation's row itself (run/trainer.py and its step hooks may not
    # import the registry for this test's sake, so their source is read).
    trainer = "".join((REPO / "jepa_core" / "run" / name).read_text(encoding="utf-8")
                      for name in ("trainer.py", "step_hooks.py"))
    added = set(re.findall(r'metrics\["([^"]+)"\]\s*=', trainer))
    assert added and added <= NAMES
    assert {registry.metric(k).group for k in added} == {"basic"}
    features, labels = torch.randn(40, 8), torch.arange(40) % 4
    scored = score_features(features, labels, knn_k=3, probe_epochs=2, noise_splits=2)  # as at step 0
    lidar = {"target/lidar", "target/lidar_noise"}  # evaluation.lidar_metrics at step 0 (tests/test_lidar.py)
    assert set(scored) | lidar == {m.name for m in registry.in_group("evaluation")}


def test_recorded_runs_log_only_registered_metrics_and_alert_on_what_their_rule_reads() -> None:
    files = sorted((REPO / "data" / "runs").glob("*/metrics.jsonl"))
    assert files
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if row.get("event") == "alert":
                assert row["metric"] in registry.read_by(row["rule"]), (path.parent.name, row["rule"])
            elif "event" not in row:
                assert set(row) - {"step", "attempt"} <= NAMES, (path.parent.name, sorted(set(row) - NAMES))


def test_every_placement_is_charted_and_every_chart_is_registered() -> None:
    placed = {(p.view, p.panel, m.name) for m in registry.METRICS for p in m.shown}
    drawn = {("group", panel, name) for panel, names in charts.METRIC_GROUPS.items() for name in names}
    drawn |= {("signal", s.key, name) for s in charts.EARLY_WARNING_SIGNALS for name in s.metrics}
    drawn |= {("eval", "", name) for name in charts.EVAL_METRICS}
    drawn |= {("throughput", "", name) for name in charts.THROUGHPUT_METRICS}
    drawn |= {("doctor", "", name) for name in doctor.KEY_METRICS}
    assert drawn == placed
    assert {s.key for s in charts.EARLY_WARNING_SIGNALS} == set(registry.panels("signal"))
    assert charts.EVAL_METRICS == charts.METRIC_GROUPS["evaluation"]  # the eval chart draws the §6 group
    # Run facts and the fixed-probe statistics are read, not charted.
    assert not any(m.shown for m in registry.in_group("run_facts"))


def test_the_rules_read_exactly_what_the_registry_says() -> None:
    rules = build_rules(RulesConfig())
    assert {r.name for r in rules} == set(registry.rules())
    for rule in rules:
        assert rule.watches <= NAMES, rule.name
        assert rule.watches == registry.read_by(rule.name), rule.name


def test_every_rule_alerts_on_an_early_warning_panel() -> None:
    # Its alerts are marked on a panel by rule name even when the metric it names is not plotted there.
    for rule in build_rules(RulesConfig()):
        assert any(any(w in rule.name for w in s.rule_words) for s in charts.EARLY_WARNING_SIGNALS), rule.name


def test_no_panel_waits_for_a_rule_that_is_gone() -> None:
    # A removed rule leaves nothing behind: every word a panel marks alerts by names a rule that exists today.
    names = [rule.name for rule in build_rules(RulesConfig())]
    for signal in charts.EARLY_WARNING_SIGNALS:
        for word in signal.rule_words:
            assert any(word in name for name in names), (signal.key, word)


def test_cadence_keys_are_one_list_everywhere() -> None:
    assert CADENCE_KEYS == tuple(f.name for f in dataclasses.fields(DiagnosticsConfig))
    assert registry.CADENCE_KEYS is CADENCE_KEYS
    keyed = [g.cadence_key for g in registry.GROUPS if g.cadence_key is not None]
    assert sorted(keyed) == sorted(CADENCE_KEYS)
    assert [(g.name, g.cadence_key) for g in instrument.GROUPS] == [(g.name, g.cadence_key)
                                                                    for g in registry.STEP_GROUPS]
    assert instrument.CADENCE_KEYS == tuple(g.cadence_key for g in registry.STEP_GROUPS)
    assert validate_control({key: 1 for key in CADENCE_KEYS})
    with pytest.raises(ControlError):
        validate_control({"loss_every_steps": 1})
    assert {m.cadence_key for m in registry.METRICS} == {*CADENCE_KEYS, None}
    assert {m.name for m in registry.METRICS if m.cadence_key is None} == {
        m.name for m in registry.in_group("run_facts")}


def test_one_alert_column_list() -> None:
    alert = Alert(step=1, rule="mask_leak", severity="critical", metric="mask/overlap_fraction", value=1.0,
                  message="m")
    assert set(alert.to_row()) - {"event"} | {"attempt"} == set(ALERT_COLUMNS)
    assert list(charts.alerts_of(None).columns) == list(ALERT_COLUMNS)
    assert set(charts.ALERT_TABLE_COLUMNS) == set(ALERT_COLUMNS) - {"attempt"}


def test_the_console_line_shows_registered_metrics() -> None:
    # jepa_core.common sits below the registry, so the console's own list is checked here.
    assert {key for key, _, _ in console._FIELDS} <= NAMES


def test_lookups_name_what_is_unknown() -> None:
    assert registry.metric("loss").cadence_key == "basic_every_steps"
    assert registry.metric("knn/accuracy").cadence_key == "eval_every_steps"
    with pytest.raises(KeyError, match="registry.py"):
        registry.metric("loss/typo")
    with pytest.raises(KeyError, match="basic"):
        registry.group("time")
    with pytest.raises(KeyError, match="throughput"):
        registry.shown_in("sidebar")


def test_the_registry_is_plain_data_without_torch() -> None:
    code = "import sys, jepa_core.metrics.registry; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO).returncode == 0
