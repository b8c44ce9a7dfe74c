"""Fault injection (design §8) and stop-on-critical; the detection benchmark itself is tested in
test_detection_benchmark.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jepa_core.method.faults import step_faults
from jepa_core.run.checkpoint import latest_checkpoint, load_checkpoint
from jepa_core.config import apply_overrides, preset
from jepa_core.metrics.stream import iter_rows
from jepa_core.run.trainer import Trainer

REPO = Path(__file__).resolve().parent.parent
FAULT_STEP = 4  # 0-based update index where every fault below begins: logged steps 1..4 are healthy

# A model and data small enough that a dozen steps take a second or two; every diagnostic logged every step.
SMALL = [
    "model.img_size=16", "model.embed_dim=32", "model.depth=1", "model.num_heads=2", "model.pred_dim=16",
    "model.pred_depth=1", "model.pred_num_heads=2", "masks.num_targets=2", "optim.steps=8", "optim.batch_size=8",
    "optim.warmup_steps=2", "data.num_train=64", "data.num_heldout=40", "eval.probe_epochs=2", "eval.at_start=false",
    "eval.artifacts=false", "diagnostics.eval_every_steps=1000", "diagnostics.basic_every_steps=1",
    "diagnostics.representation_every_steps=1", "diagnostics.covariance_every_steps=1",
    "diagnostics.param_distance_every_steps=1", "diagnostics.fixed_batch_every_steps=1",
    "diagnostics.mask_check_every_steps=1",
    "diagnostics.weights_health_every_steps=1000", "logging.tensorboard=false", "logging.progress_bar=false",
    "logging.checkpoint_every_steps=1000", "runtime.num_threads=1", "runtime.device='cpu'",
    f"faults.start_step={FAULT_STEP}",
]



def train_small(tmp_path: Path, *extra: str, name: str = "run") -> tuple[Trainer, str, dict[int, dict]]:
    cfg = apply_overrides(preset("tiny"), SMALL + [f"logging.runs_dir={json.dumps(str(tmp_path))}", *extra])
    trainer = Trainer(cfg, run_dir=tmp_path / name, quiet=True)
    status = trainer.run()
    rows: dict[int, dict] = {}
    for row in iter_rows(tmp_path / name / "metrics.jsonl"):
        if "event" not in row:
            rows.setdefault(row["step"], {}).update(row)
    return trainer, status, rows


def series(rows: dict[int, dict], key: str) -> dict[int, float]:
    return {step: row[key] for step, row in sorted(rows.items()) if key in row}


def healthy_part(values: dict[int, float]) -> list[float]:
    return [v for s, v in values.items() if s <= FAULT_STEP]


def faulty_part(values: dict[int, float]) -> list[float]:
    return [v for s, v in values.items() if s > FAULT_STEP]


# ------------------------------------------------------------------------------------------------- the faults


def test_mask_leak_starts_at_start_step(tmp_path):
    _, _, rows = train_small(tmp_path, "faults.mask_leak_fraction=0.5")
    overlap = series(rows, "mask/overlap_fraction")
    assert healthy_part(overlap) and all(v == 0.0 for v in healthy_part(overlap))
    assert all(v > 0.0 for v in faulty_part(overlap))


def test_frozen_target_keeps_fixed_batch_statistics_exactly_constant(tmp_path):
    trainer, _, rows = train_small(tmp_path, "faults.frozen_target=true", "rules.settle_readings=0")
    for key in ("target/fixed_batch_std_mean", "target/fixed_batch_norm_mean"):
        values = series(rows, key)
        assert len(set(healthy_part(values))) == len(healthy_part(values)), key  # healthy: moves every update
        frozen = [v for s, v in values.items() if s >= FAULT_STEP]  # the last healthy reading onward
        assert len(frozen) >= 4 and len(set(frozen)) == 1, key
    for key in ("ema/param_l2", "ema/fixed_batch_distance"):  # the online encoder keeps moving away
        distance = faulty_part(series(rows, key))
        assert all(b > a for a, b in zip(distance, distance[1:])), key
    assert "ema_stalled" in {a.rule for a in trainer.rules.alerts}


def test_target_copies_online_makes_the_distance_exactly_zero(tmp_path):
    _, _, rows = train_small(tmp_path, "faults.target_copies_online=true")
    for key in ("ema/relative_param_l2", "ema/fixed_batch_distance"):  # in weights, and in features on the probe
        distance = series(rows, key)
        assert all(v > 0.0 for v in healthy_part(distance)), key
        assert faulty_part(distance) and all(v == 0.0 for v in faulty_part(distance)), key
    assert all(v == 0.0 for v in faulty_part(series(rows, "ema_tau")))


def test_target_gradients_reach_the_target_only_from_start_step(tmp_path):
    # weights health every 2 steps: the noise-scale micro-batch backward runs both before and after the fault
    trainer, _, rows = train_small(tmp_path, "faults.target_gradients=true", "diagnostics.weights_health_every_steps=2")
    counts = series(rows, "ema/target_grad_params")
    assert all(v == 0.0 for v in healthy_part(counts))
    assert all(v == len(list(trainer.model.target_encoder.parameters())) for v in faulty_part(counts))
    assert [a.rule for a in trainer.rules.alerts if a.rule == "target_gradients"] == ["target_gradients"]


def test_lr_blowup_multiplies_the_scheduled_lr(tmp_path):
    _, _, healthy = train_small(tmp_path, name="healthy")
    _, _, blown = train_small(tmp_path, "faults.lr_blowup_factor=50.0", name="blown")
    for step, lr in series(blown, "lr").items():
        expected = healthy[step]["lr"] * (50.0 if step > FAULT_STEP else 1.0)
        assert lr == pytest.approx(expected, rel=1e-9), step


def test_collapse_weight_applies_only_from_start_step(tmp_path):
    cfg = apply_overrides(preset("tiny"), SMALL + [f"logging.runs_dir={json.dumps(str(tmp_path))}",
                                                   "faults.collapse_weight=2.0"])
    trainer = Trainer(cfg, run_dir=tmp_path / "run", quiet=True)
    assert step_faults(trainer.cfg.faults, FAULT_STEP - 1).collapse_weight == 0.0
    assert step_faults(trainer.cfg.faults, FAULT_STEP).collapse_weight == 2.0
    trainer.close()


def test_faults_are_recorded_in_meta(tmp_path):
    train_small(tmp_path, "faults.frozen_target=true", "faults.lr_blowup_factor=2.0")
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert sorted(meta["faults"]) == ["frozen_target", "lr_blowup"]


# ------------------------------------------------------------------------------------------- stop on critical


def test_stop_on_critical_stops_with_a_final_checkpoint(tmp_path):
    trainer, status, _ = train_small(tmp_path, "faults.mask_leak_fraction=0.5", "rules.stop_on_critical=true",
                                     "optim.steps=50")
    assert status == "stopped_on_alert"
    assert trainer.step == FAULT_STEP + 1  # the first leaking update is logged at FAULT_STEP + 1 and stops it
    ckpt = latest_checkpoint(tmp_path / "run" / "checkpoints")
    assert ckpt is not None and load_checkpoint(ckpt)["step"] == FAULT_STEP + 1
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["status"] == "stopped_on_alert"


def test_stop_on_critical_is_off_by_default(tmp_path):
    trainer, status, _ = train_small(tmp_path, "faults.mask_leak_fraction=0.5")
    assert status == "finished" and trainer.step == 8
    assert any(a.severity == "critical" for a in trainer.rules.alerts)


def test_mask_leak_never_asks_more_of_a_small_context_than_it_holds(tmp_path):
    cfg = apply_overrides(preset("tiny"), SMALL + [f"logging.runs_dir={json.dumps(str(tmp_path))}",
                                                   "faults.mask_leak_fraction=1.0", "model.img_size=32",
                                                   "masks.num_targets=4"])  # the tiny preset's 8x8 grid and masks
    trainer = Trainer(cfg, run_dir=tmp_path / "run", quiet=True)
    for step in range(FAULT_STEP, FAULT_STEP + 40):  # every target patch asked for: more than most contexts hold
        _, masks = trainer.batch(step)
        context = [set(row.tolist()) for row in masks.context_idx]
        targets = [set(row.flatten().tolist()) for row in masks.target_idx]
        assert all(c & t for c, t in zip(context, targets)), step
    trainer.close()
