"""Data-parallel training under torchrun on CPU (gloo): one run directory, one stream, global metrics."""

import json
import subprocess
import sys

import pytest

from jepa_core.metrics.reader import read_metrics


@pytest.mark.slow
def test_torchrun_two_ranks_write_one_stream(tmp_path):
    sets = ["optim.steps=6", "optim.warmup_steps=1", "optim.batch_size=16", "data.num_train=128",
            "data.num_heldout=64", "eval.probe_epochs=5", "diagnostics.eval_every_steps=3",
            "diagnostics.basic_every_steps=1",
            "diagnostics.weights_health_every_steps=2", "runtime.num_threads=1", "logging.tensorboard=false",
            f"logging.runs_dir={json.dumps(str(tmp_path))}"]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "jepa_core.train", "--quiet", "--name", "ddp"]
    for item in sets:
        cmd += ["--set", item]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [p.name for p in tmp_path.iterdir()] == ["ddp"]  # rank 1 created nothing of its own
    meta = json.loads((tmp_path / "ddp" / "meta.json").read_text())
    assert meta["world_size"] == 2 and meta["status"] == "finished"
    frame = read_metrics(tmp_path / "ddp" / "metrics.jsonl").scalars
    loss_steps = frame.dropna(subset=["loss"])["step"].tolist()
    assert loss_steps == sorted(set(loss_steps)) and loss_steps  # one row per step: rank 1 wrote nothing
    # The noise scale under DDP comes from per-rank gradients; it is positive when ranks see different data.
    assert (frame["health/gns"].dropna() > 0).all() and frame["health/gns"].notna().sum() >= 2
