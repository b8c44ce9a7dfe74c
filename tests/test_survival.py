"""What survives what (README "What survives what"): divergence, a second writer, damaged checkpoints, a missing
meta.json, a run killed before its first checkpoint. Signals and SIGKILLs, which need real processes, are in
test_signals.py and test_kill_suite.py."""

import json
import math
import os
import subprocess
import sys
from collections import Counter

import pytest
import torch

from jepa_core.metrics import representation, weights_health
from jepa_core.run.checkpoint import find_resume_checkpoint, save_checkpoint, verify_checkpoint
from jepa_core.run.lock import RunLock, RunLockedError, lock_holder
from jepa_core.run.rundir import load_run_config
from jepa_core.metrics.stream import iter_rows
from jepa_core.run.trainer import Trainer
from jepa_core.train import main
from test_train import SMALL_MODEL, deterministic_rows, fast_config


def strict_lines(path):
    def reject(token):
        raise ValueError(f"non-strict JSON constant {token}")

    return [json.loads(line, parse_constant=reject) for line in path.read_text().splitlines()]


def duplicated_cells(metrics_path) -> int:
    """(step, metric) cells present more than once after the resume purge: 0 for a well-formed stream."""
    cells = Counter()
    for row in iter_rows(metrics_path):
        if "event" in row:
            continue
        cells.update((row["step"], key) for key in row if key not in ("step", "attempt"))
    return sum(n - 1 for n in cells.values() if n > 1)


# ------------------------------------------------------------------------------------------------ divergence
# x1e7: at x1e5 the step's attention (op by op on the CPU, as I-JEPA's own) keeps this run finite; it was PyTorch's
# fused CPU kernel that overflowed to NaN there.
DIVERGE = ["optim.steps=40", "optim.warmup_steps=5", "faults.lr_blowup_factor=1e7", "faults.start_step=5",
           "diagnostics.basic_every_steps=1"]


def test_diverging_run_stops_as_diverged_with_nan_rows_and_a_critical_alert(tmp_path, capsys):
    small = [*SMALL_MODEL, "data.num_train=256", "data.num_heldout=64", "optim.batch_size=16", "eval.probe_epochs=5",
             "logging.tensorboard=false", "diagnostics.weights_health_every_steps=1",
             "diagnostics.covariance_every_steps=1", f"logging.runs_dir={json.dumps(str(tmp_path))}"]
    args = ["--quiet", "--name", "div"]
    for item in DIVERGE + small:
        args += ["--set", item]
    assert main(args) == 1  # diverged is a failed run for a script, not a crash
    run = tmp_path / "div"
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "diverged"
    rows = strict_lines(run / "metrics.jsonl")  # every line strict JSON: no bare NaN/Infinity tokens
    raw = (run / "metrics.jsonl").read_text()
    assert '"NaN"' in raw or '"Infinity"' in raw
    last = meta["last_step"]
    failing = [r for r in rows if r["step"] == last and "loss" in r]
    assert failing and not all(math.isfinite(float(r["loss"])) and math.isfinite(float(r["grad_norm"]))
                               for r in failing)
    alerts = [r for r in rows if r.get("event") == "alert" and r["severity"] == "critical"]
    assert any(a["rule"] == "non_finite" for a in alerts)
    # The final checkpoint is the last finite state: the step before the refused update, finite weights.
    found = find_resume_checkpoint(run / "checkpoints")
    assert found.state["step"] == last - 1
    assert all(torch.isfinite(t).all() for t in found.state["model"].values())


@pytest.mark.parametrize("values", [float("nan"), float("inf"), 1e200])
def test_rank_diagnostics_read_nan_instead_of_raising(values):
    w = torch.full((12, 8), values, dtype=torch.float64)
    w[0, 0] = 1.0
    assert math.isnan(float(weights_health.stable_rank_tensor(w)))
    assert math.isnan(float(representation.effective_rank_tensor(w)))


def test_a_diagnostic_group_that_raises_is_skipped_and_logged(tmp_path, monkeypatch):
    from jepa_core.metrics import instrument

    def broken(inst, ctx):
        raise torch.linalg.LinAlgError("linalg.eigh: failed to converge")

    groups = tuple(instrument.MetricGroup(g.name, g.cadence_key, broken if g.name == "covariance" else g.compute)
                   for g in instrument.GROUPS)
    monkeypatch.setattr(instrument, "GROUPS", groups)
    trainer = Trainer(fast_config(tmp_path), run_dir=tmp_path / "r", quiet=True)
    assert trainer.run() == "finished"
    rows = list(iter_rows(tmp_path / "r" / "metrics.jsonl"))
    errors = [r for r in rows if r.get("event") == "diagnostic_error"]
    assert errors and {r["group"] for r in errors} == {"covariance"} and "LinAlgError" in errors[0]["message"]
    assert not any("target/effective_rank" in r for r in rows)
    assert any("loss" in r for r in rows)


# ------------------------------------------------------------------------------------------------ one writer
def test_resume_is_refused_while_another_process_holds_the_run(tmp_path, capsys):
    trainer = Trainer(fast_config(tmp_path), run_dir=tmp_path / "held", quiet=True)
    assert trainer.run(max_steps=6) == "paused"  # open and holding the run, as a paused notebook trainer does
    before = (tmp_path / "held" / "metrics.jsonl").read_bytes()
    holder = lock_holder(tmp_path / "held")
    assert holder["pid"] == os.getpid()
    code = main(["--quiet", "--resume", str(tmp_path / "held")])
    err = capsys.readouterr().err
    assert code == 2 and f"pid {os.getpid()}" in err and "held by" in err
    assert (tmp_path / "held" / "metrics.jsonl").read_bytes() == before  # nothing written by the refused one
    with pytest.raises(RunLockedError):
        Trainer(load_run_config(tmp_path / "held"), run_dir=tmp_path / "held", resume=True, quiet=True)
    trainer.close()
    assert lock_holder(tmp_path / "held") is None


def test_a_lock_left_by_a_dead_process_is_taken_over(tmp_path, capsys):
    first = Trainer(fast_config(tmp_path), run_dir=tmp_path / "r", quiet=True)
    assert first.run(max_steps=6) == "paused"
    first.close()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = {"pid": int(dead.stdout), "host": "this-host", "since": 0}
    (tmp_path / "r" / ".lock").write_text(json.dumps(stale))  # what a SIGKILLed trainer leaves behind
    resumed = Trainer(load_run_config(tmp_path / "r"), run_dir=tmp_path / "r", resume=True, quiet=True)
    assert resumed.lock.previous == stale
    assert lock_holder(tmp_path / "r")["pid"] == os.getpid()
    assert resumed.run() == "finished"
    assert lock_holder(tmp_path / "r") is None


def test_lock_refuses_a_second_holder_in_another_process(tmp_path):
    code = ("import sys, time; from jepa_core.run.lock import RunLock; RunLock(sys.argv[1]).acquire(); "
            "print('held', flush=True); time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        with pytest.raises(RunLockedError, match=f"pid {child.pid}"):
            RunLock(tmp_path).acquire()
    finally:
        child.kill()
        child.wait()
    with RunLock(tmp_path) as lock:  # the kernel released the dead holder's lock
        assert lock.held and lock.previous["pid"] == child.pid


# ------------------------------------------------------------------------------------------------ checkpoints
def test_bit_flipped_and_truncated_checkpoints_are_detected(tmp_path):
    save_checkpoint(tmp_path, 5, {"step": 5, "w": torch.arange(4096.0)})
    save_checkpoint(tmp_path, 10, {"step": 10, "w": torch.arange(4096.0) * 2})
    assert verify_checkpoint(tmp_path / "step_0000010.pt") is None
    step10 = tmp_path / "step_0000010.pt"
    data = bytearray(step10.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit, inside the tensor payload
    step10.write_bytes(bytes(data))
    latest = tmp_path / "latest.pt"
    latest.write_bytes(latest.read_bytes()[: latest.stat().st_size // 2])
    assert "sha256" in verify_checkpoint(step10)
    assert "truncated" in verify_checkpoint(latest)
    found = find_resume_checkpoint(tmp_path)
    assert found.state["step"] == 5 and found.path.name == "step_0000005.pt"
    reasons = dict((p.name, why) for p, why in found.skipped)
    assert set(reasons) == {"latest.pt", "step_0000010.pt"}
    assert "sha256" in reasons["step_0000010.pt"] and "truncated" in reasons["latest.pt"]


def test_resume_prefers_the_newest_intact_checkpoint_over_an_older_latest(tmp_path):
    save_checkpoint(tmp_path, 5, {"step": 5})
    latest_of_5 = (tmp_path / "latest.pt").read_bytes(), (tmp_path / "latest.pt.digest").read_bytes()
    save_checkpoint(tmp_path, 10, {"step": 10})
    (tmp_path / "latest.pt").write_bytes(latest_of_5[0])  # an older latest.pt, intact and matching its digest
    (tmp_path / "latest.pt.digest").write_bytes(latest_of_5[1])
    found = find_resume_checkpoint(tmp_path)
    assert found.state["step"] == 10 and found.path.name == "step_0000010.pt"


def test_resume_skips_a_damaged_checkpoint_and_says_so(tmp_path, capsys):
    trainer = Trainer(fast_config(tmp_path), run_dir=tmp_path / "r", quiet=True)
    assert trainer.run() == "finished"  # checkpoints at 6 and 12
    ckpts = tmp_path / "r" / "checkpoints"
    for name in ("step_0000012.pt", "latest.pt"):
        data = bytearray((ckpts / name).read_bytes())
        data[len(data) // 2: len(data) // 2 + 4096] = os.urandom(4096)
        (ckpts / name).write_bytes(bytes(data))
    (ckpts / ".step_0000012.pt.abcd.tmp").write_bytes(b"an interrupted write")
    capsys.readouterr()
    resumed = Trainer(load_run_config(tmp_path / "r"), run_dir=tmp_path / "r", resume=True, quiet=True)
    err = capsys.readouterr().err
    assert resumed.step == 6
    assert "skipped" in err and "step_0000012.pt" in err and "latest.pt" in err and "step_0000006.pt" in err
    assert not list(ckpts.glob("*.tmp"))  # temp files of interrupted writes are removed on the next start
    assert resumed.run() == "finished"
    assert duplicated_cells(tmp_path / "r" / "metrics.jsonl") == 0


# ------------------------------------------------------------------------------------------------ attempts
def test_missing_meta_json_resumes_without_duplicates(tmp_path):
    straight = Trainer(fast_config(tmp_path), run_dir=tmp_path / "straight", quiet=True)
    assert straight.run() == "finished"
    first = Trainer(fast_config(tmp_path), run_dir=tmp_path / "r", quiet=True)
    assert first.run(max_steps=8) == "paused"  # checkpoint at 6, rows up to 8
    first.close()
    (tmp_path / "r" / "meta.json").unlink()
    resumed = Trainer(load_run_config(tmp_path / "r"), run_dir=tmp_path / "r", resume=True, quiet=True)
    assert resumed.meta["attempt"] == 2  # from the stream, not from the missing meta.json
    assert resumed.run() == "finished"
    assert duplicated_cells(tmp_path / "r" / "metrics.jsonl") == 0
    a, b = deterministic_rows(tmp_path / "straight" / "metrics.jsonl"), deterministic_rows(tmp_path / "r" / "metrics.jsonl")
    assert a["loss"].dropna().tolist() == b["loss"].dropna().tolist()


def test_a_run_killed_before_its_first_checkpoint_resumes_from_step_zero(tmp_path, capsys):
    straight = Trainer(fast_config(tmp_path), run_dir=tmp_path / "straight", quiet=True)
    assert straight.run() == "finished"
    first = Trainer(fast_config(tmp_path), run_dir=tmp_path / "r", quiet=True)
    assert first.run(max_steps=4) == "paused"  # no checkpoint yet (every 6 steps)
    first.close()
    assert main(["--quiet", "--name", "r", "--set", f"logging.runs_dir={json.dumps(str(tmp_path))}"]) == 2
    assert "--resume" in capsys.readouterr().err
    resumed = Trainer(load_run_config(tmp_path / "r"), run_dir=tmp_path / "r", resume=True, quiet=True)
    assert resumed.step == 0 and "step 0" in capsys.readouterr().err
    assert resumed.run() == "finished"
    assert duplicated_cells(tmp_path / "r" / "metrics.jsonl") == 0
    a, b = deterministic_rows(tmp_path / "straight" / "metrics.jsonl"), deterministic_rows(tmp_path / "r" / "metrics.jsonl")
    assert a["loss"].dropna().tolist() == b["loss"].dropna().tolist()


def test_step_n_leaves_meta_paused_and_a_later_stop_records_stopped(tmp_path):
    from jepa_core.run.control import write_control

    trainer = Trainer(fast_config(tmp_path), run_dir=tmp_path / "r", quiet=True)
    assert trainer.run(max_steps=3) == "paused"
    meta = json.loads((tmp_path / "r" / "meta.json").read_text())
    assert meta["status"] == "paused" and meta["last_step"] == 3
    write_control(tmp_path / "r", stop=True)
    assert trainer.run() == "stopped"
    meta = json.loads((tmp_path / "r" / "meta.json").read_text())
    assert meta["status"] == "stopped" and meta["last_step"] == 3  # asked while paused: no further step
    assert find_resume_checkpoint(tmp_path / "r" / "checkpoints").state["step"] == 3




def test_a_stop_left_for_an_earlier_attempt_is_cleared_but_one_asked_during_start_up_is_kept(tmp_path):
    import time

    from jepa_core.run.control import write_control

    first = Trainer(fast_config(tmp_path), run_dir=tmp_path / "r", quiet=True)
    assert first.run(max_steps=6) == "paused"
    first.close()
    write_control(tmp_path / "r", stop=True)  # asked of the first attempt, which never saw it
    resumed = Trainer(load_run_config(tmp_path / "r"), run_dir=tmp_path / "r", resume=True, quiet=True)
    assert resumed.run(max_steps=2) == "paused" and resumed.step == 8  # the stale request did not end it
    resumed.close()
    write_control(tmp_path / "r", stop=True)
    later = time.time() + 60  # as if written while the next trainer was still building its data
    os.utime(tmp_path / "r" / "control.json", (later, later))
    again = Trainer(load_run_config(tmp_path / "r"), run_dir=tmp_path / "r", resume=True, quiet=True)
    assert again.run() == "stopped" and again.step == 6  # honoured before the first step (resumed at 6)


def test_end_closes_a_paused_trainer_like_run_does(tmp_path):
    trainer = Trainer(fast_config(tmp_path), run_dir=tmp_path / "r", quiet=True)
    assert trainer.run(max_steps=3) == "paused"
    assert trainer.end() == "stopped"
    meta = json.loads((tmp_path / "r" / "meta.json").read_text())
    assert meta["status"] == "stopped" and meta["last_step"] == 3
    assert find_resume_checkpoint(tmp_path / "r" / "checkpoints").state["step"] == 3
    assert lock_holder(tmp_path / "r") is None


@pytest.mark.slow  # three short trainings
def test_until_stops_like_a_signal_and_resume_goes_on_to_the_same_run(tmp_path):
    """`jepa train --until N`: a final checkpoint at N, status stopped, every checkpoint kept with
    logging.keep_checkpoints=0; --resume then finishes a run identical to an uninterrupted one."""
    from test_train import FAST

    sets = [x for item in [*FAST, f"logging.runs_dir={json.dumps(str(tmp_path))}", "logging.keep_checkpoints=0",
                           "logging.checkpoint_every_steps=2"] for x in ("--set", item)]
    assert main(["--quiet", "--name", "straight", *sets]) == 0
    assert main(["--quiet", "--name", "sliced", "--until", "5", *sets]) == 0
    meta = json.loads((tmp_path / "sliced" / "meta.json").read_text())
    assert (meta["status"], meta["last_step"]) == ("stopped", 5)
    kept = sorted(p.name for p in (tmp_path / "sliced" / "checkpoints").glob("step_*.pt"))
    assert kept == ["step_0000002.pt", "step_0000004.pt", "step_0000005.pt"]  # none pruned
    assert main(["--quiet", "--resume", str(tmp_path / "sliced")]) == 0
    assert json.loads((tmp_path / "sliced" / "meta.json").read_text())["status"] == "finished"
    a = deterministic_rows(tmp_path / "straight" / "metrics.jsonl")
    b = deterministic_rows(tmp_path / "sliced" / "metrics.jsonl")
    assert a.equals(b)


def test_until_must_be_a_positive_step(tmp_path, capsys):
    assert main(["--quiet", "--until", "0", "--set", f"logging.runs_dir={json.dumps(str(tmp_path))}"]) == 2
    assert "--until" in capsys.readouterr().err and not any(tmp_path.iterdir())
