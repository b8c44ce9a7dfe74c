import json
import math
import subprocess
import sys

import pytest
import torch

from jepa_core.run import checkpoint as ckpt_mod
from jepa_core.run.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from jepa_core.config import apply_overrides, preset
from jepa_core.metrics.reader import read_metrics
from jepa_core.run.trainer import Trainer
from jepa_core.train import main

# A model a few times smaller than tiny's: what these tests check (resume, survival, the stream) does not depend on
# its size, and it keeps the everyday tier fast.
SMALL_MODEL = ["model.embed_dim=32", "model.depth=2", "model.num_heads=2", "model.pred_dim=16", "model.pred_depth=1",
               "model.pred_num_heads=2"]
# A few seconds of training: the small model, small batch, small data, every diagnostic due often.
FAST = [
    *SMALL_MODEL, "optim.steps=12", "optim.batch_size=16", "optim.warmup_steps=3", "data.num_train=256",
    "data.num_heldout=64",
    "eval.probe_epochs=5", "diagnostics.eval_every_steps=6", "logging.checkpoint_every_steps=6",
    "diagnostics.covariance_every_steps=3", "diagnostics.weights_health_every_steps=4",
    "diagnostics.param_distance_every_steps=3", "diagnostics.fixed_batch_every_steps=3", "logging.tensorboard=false",
    "logging.progress_bar=false",
]
# Wall-clock and process figures differ between any two runs; everything else must match exactly.
NONDETERMINISTIC_PREFIXES = ("time/", "system/", "memory/")


def fast_config(tmp_path, *extra):
    return apply_overrides(preset("tiny"), FAST + [f"logging.runs_dir={json.dumps(str(tmp_path))}", *extra])


def deterministic_rows(path):
    frame = read_metrics(path).scalars
    keep = [c for c in frame.columns if not c.startswith(NONDETERMINISTIC_PREFIXES) and c != "attempt"]
    return frame[keep].sort_values("step", kind="stable").reset_index(drop=True)


def test_resume_reproduces_uninterrupted_run(tmp_path):
    straight = Trainer(fast_config(tmp_path), run_dir=tmp_path / "straight", quiet=True)
    assert straight.run() == "finished"

    first = Trainer(fast_config(tmp_path), run_dir=tmp_path / "resumed", quiet=True)
    assert first.run(max_steps=6) == "paused"
    first.close()
    from jepa_core.run.rundir import load_run_config

    second = Trainer(load_run_config(tmp_path / "resumed"), run_dir=tmp_path / "resumed", resume=True, quiet=True)
    assert second.step == 6
    assert second.run() == "finished"

    a = deterministic_rows(tmp_path / "straight" / "metrics.jsonl")
    b = deterministic_rows(tmp_path / "resumed" / "metrics.jsonl")
    assert list(a.columns) == list(b.columns)
    assert a["step"].tolist() == b["step"].tolist()
    for column in a.columns:
        for x, y in zip(a[column].tolist(), b[column].tolist()):
            assert (math.isnan(x) and math.isnan(y)) or x == pytest.approx(y, rel=1e-5, abs=1e-7), column
    meta = json.loads((tmp_path / "resumed" / "meta.json").read_text())
    assert meta["attempt"] == 2 and meta["status"] == "finished"


def test_interrupted_checkpoint_write_keeps_previous(tmp_path, monkeypatch):
    save_checkpoint(tmp_path, 5, {"step": 5, "w": torch.ones(3)})
    real_save = torch.save

    def torn_save(obj, fh, *args, **kwargs):
        fh.write(b"PK\x03\x04 half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(ckpt_mod.torch, "save", torn_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path, 10, {"step": 10, "w": torch.zeros(3)})
    monkeypatch.setattr(ckpt_mod.torch, "save", real_save)
    assert not (tmp_path / "step_0000010.pt").exists()
    assert not list(tmp_path.glob("*.tmp"))
    path = latest_checkpoint(tmp_path)
    assert load_checkpoint(path)["step"] == 5


def test_latest_falls_back_when_latest_is_damaged(tmp_path):
    save_checkpoint(tmp_path, 5, {"step": 5})
    (tmp_path / "latest.pt").write_bytes(b"garbage")
    assert load_checkpoint(latest_checkpoint(tmp_path))["step"] == 5


def run_cli(tmp_path, capsys, *args):
    code = main(["--quiet", "--set", f"logging.runs_dir={json.dumps(str(tmp_path / 'runs'))}", *args])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("args, needle", [
    (["--set", "optim.batch_size=0"], "optim.batch_size"),
    (["--set", "masks.target_scale=[0.2, 1.4]"], "masks.target_scale"),
    (["--set", "masks.target_aspect=[3.0, 1.0]"], "masks.target_aspect"),
    (["--set", "diagnostics.basic_every_steps=0"], "diagnostics.basic_every_steps"),
    (["--set", "model.img_size=33"], "model.img_size"),
    (["--set", "optim.bogus=1"], "optim.bogus"),
    (["--set", "data.dataset=folder", "--set", "data.path=/nonexistent/images"], "/nonexistent/images"),
    (["--set", "data.dataset=npz", "--set", "data.path=/nonexistent/x.npz"], "/nonexistent/x.npz"),
    (["--config", "/nonexistent/config.toml"], "/nonexistent/config.toml"),
])
def test_cli_rejects_bad_input_before_writing(tmp_path, capsys, args, needle):
    code, err = run_cli(tmp_path, capsys, *args)
    assert code == 2
    assert needle in err
    runs = tmp_path / "runs"
    assert not runs.exists() or not any(runs.iterdir())


def test_cli_malformed_config_names_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[optim]\nsteps = 10\nlr = = 3\nbeta1 = 0.9\n")
    code, err = run_cli(tmp_path, capsys, "--config", str(bad))
    assert code == 2 and str(bad) in err and "line" in err


def test_existing_run_is_not_overwritten(tmp_path, capsys, monkeypatch):
    from jepa_core.run import trainer as trainer_mod

    def no_data_yet(cfg):
        raise AssertionError("the data were built before the taken run name was refused")

    monkeypatch.setattr(trainer_mod, "datasets_for", no_data_yet)  # refused before any work starts
    (tmp_path / "runs" / "taken").mkdir(parents=True)
    (tmp_path / "runs" / "taken" / "metrics.jsonl").write_text('{"step": 1, "loss": 1.0}\n')
    code, err = run_cli(tmp_path, capsys, "--name", "taken")
    assert code == 2 and "already exists" in err
    assert (tmp_path / "runs" / "taken" / "metrics.jsonl").read_text() == '{"step": 1, "loss": 1.0}\n'


def test_jepa_console_script_trains_and_writes_run_dir(tmp_path):
    args = [sys.executable, "-m", "jepa_core.cli", "train", "--quiet", "--name", "cli"]
    extra = [f"logging.runs_dir={json.dumps(str(tmp_path))}", "optim.steps=4", "diagnostics.basic_every_steps=2"]
    for item in FAST + extra:
        args += ["--set", item]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    run = tmp_path / "cli"
    for name in ("config.toml", "meta.json", "metrics.jsonl", "checkpoints/latest.pt", "checkpoints/step_0000004.pt"):
        assert (run / name).exists(), name
    table = read_metrics(run / "metrics.jsonl")
    for key in ("loss", "lr", "ema_tau", "knn/accuracy", "linear_probe/val_acc"):
        assert table.scalars[key].notna().any(), key
    assert table.scalars["step"].max() == 4


def test_cadence_change_applies_from_next_step_and_is_logged(tmp_path):
    from jepa_core.run.control import write_control

    cfg = fast_config(tmp_path, "diagnostics.covariance_every_steps=100", "diagnostics.eval_every_steps=100")
    trainer = Trainer(cfg, run_dir=tmp_path / "live", quiet=True)
    assert trainer.run(max_steps=4) == "paused"
    write_control(tmp_path / "live", covariance_every_steps=2, stop=False)
    assert trainer.run(max_steps=4) == "paused"
    write_control(tmp_path / "live", stop=True)
    assert trainer.run() == "stopped" and trainer.step == 8  # asked while paused: no further step is taken
    table = read_metrics(tmp_path / "live" / "metrics.jsonl")
    ranked = table.scalars.dropna(subset=["target/effective_rank"])["step"].tolist()
    assert ranked == [6, 8]  # nothing before the change, every 2nd step after it
    cadence_rows = table.events[table.events["event"] == "cadence"]
    assert cadence_rows["covariance_every_steps"].tolist() == [2]
