"""TrainingSession driven without a browser: Start/Stop, Step N, Launch detached + Reattach + cadence + Stop, and a
critical alert that stops the run; each checks the status (meta.json's and the session's), last step and checkpoints.
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from jepa_core.config import preset
from jepa_core.run import status as words
from jepa_core.metrics.stream import iter_rows
from jepa_core.workbench.plan import Plan, plan_from_form
from jepa_core.workbench.session import TrainingSession
from jepa_core.workbench.view import IDLE, SessionView

# Seconds per run on a CPU: small data, no evaluation before the end, no artifacts or TensorBoard.
TINY = {"data.num_train": 256, "data.num_heldout": 256, "optim.steps": 30, "optim.batch_size": 16,
        "optim.warmup_steps": 3, "eval.at_start": False, "diagnostics.eval_every_steps": 1000,
        "eval.artifacts": False, "logging.tensorboard": False, "runtime.num_threads": 1}


def make_plan(runs_dir: Path, name: str, **extra) -> Plan:
    return plan_from_form({"preset": "tiny"}, extra={**TINY, "logging.runs_dir": str(runs_dir),
                                                     "logging.name": name, **extra})


def wait_until(condition: Callable[[], bool], timeout: float = 120.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def meta(run_dir: Path) -> dict:
    return json.loads((run_dir / "meta.json").read_text())


@contextlib.contextmanager
def killed_if_left(launched) -> Iterator[None]:
    """A launched `jepa train` process never outlives the test, whatever it asserts."""
    try:
        yield
    finally:
        if launched.process.poll() is None:
            launched.process.kill()
            launched.process.wait(30)


def checkpoint_steps(run_dir: Path) -> set[int]:
    return {int(p.stem.split("_")[1]) for p in (run_dir / "checkpoints").glob("step_*.pt")}


@pytest.fixture()
def session(tmp_path: Path) -> Iterator[TrainingSession]:
    views: list[SessionView] = []
    s = TrainingSession(roots=[tmp_path / "runs"], on_change=views.append, poll_every=0.1)
    s.views = views  # what the notebook would have been handed
    try:
        yield s
    finally:
        s.close()


def test_idle_session_says_so_and_shows_no_progress(session: TrainingSession) -> None:
    view = session.view()
    assert view.status == IDLE and view.idle and not view.busy and view.run_dir is None
    assert session.stop() == "Nothing to stop."
    assert session.start(None) == "Fix the config first."
    assert session.mask_overlay() is None and session.running_runs() == []


def test_start_then_stop(session: TrainingSession, tmp_path: Path) -> None:
    plan = make_plan(tmp_path / "runs", "start-stop", **{"optim.steps": 2000})
    session.start(plan)
    assert session.view().phase == "building data"  # said before the trainer builds its data
    wait_until(lambda: session.view().step >= 3, what="three steps")
    assert session.start(plan) == "Busy training: Stop first."
    overlay = session.mask_overlay()
    assert overlay is not None and overlay[:4] == b"\x89PNG"
    session.stop()
    assert session.wait(120)
    view = session.view()
    run = tmp_path / "runs" / "start-stop"
    assert view.status == words.STOPPED == meta(run)["status"]
    assert view.step == meta(run)["last_step"] and view.step in checkpoint_steps(run)
    assert view.message == f"stopped at step {view.step} of 2000."  # the end replaces "Stop requested"
    seen = {(v.status, v.phase) for v in session.views}
    assert (words.RUNNING, "building data") in seen and (words.RUNNING, "training") in seen


def test_step_n_twice_then_stop(session: TrainingSession, tmp_path: Path) -> None:
    plan = make_plan(tmp_path / "runs", "stepper")
    run = tmp_path / "runs" / "stepper"
    session.step(plan, 4)
    assert session.wait(120)
    assert session.view().status == words.PAUSED == meta(run)["status"] and meta(run)["last_step"] == 4
    assert session.running_runs()[0].path == run  # a paused run is live: its writer still holds it
    assert session.launch_detached(plan).startswith("A paused run is open")
    session.step(None, 3)  # goes on with the paused trainer: no plan needed
    assert session.wait(120)
    view = session.view()
    assert view.status == words.PAUSED and view.step == 7 and meta(run)["last_step"] == 7
    assert "Step N goes on" in view.message
    session.stop()  # ends the paused run: final checkpoint, status, lock released
    assert session.wait(120)
    assert session.view().status == words.STOPPED == meta(run)["status"]
    assert meta(run)["last_step"] == 7 and 7 in checkpoint_steps(run)
    assert session.view().message == "stopped at step 7 of 30."
    assert session.running_runs() == []


def test_critical_alert_stops_the_run(session: TrainingSession, tmp_path: Path) -> None:
    plan = make_plan(tmp_path / "runs", "leak", **{"faults.mask_leak_fraction": 0.5, "faults.start_step": 2,
                                                   "rules.stop_on_critical": True,
                                                   "diagnostics.mask_check_every_steps": 2})
    session.start(plan)
    assert session.wait(120)
    run = tmp_path / "runs" / "leak"
    view = session.view()
    assert view.status == words.STOPPED_ON_ALERT == meta(run)["status"]
    assert view.step == meta(run)["last_step"] < 30 and view.step in checkpoint_steps(run)
    alerts = session.table.alerts
    assert "mask_leak" in set(alerts["rule"]) and "critical" in set(alerts["severity"])


def test_stop_while_data_is_built_stops_at_step_zero(session: TrainingSession, tmp_path: Path) -> None:
    session.start(make_plan(tmp_path / "runs", "early", **{"eval.at_start": True}))
    session.stop()
    assert session.wait(120)
    run = tmp_path / "runs" / "early"
    assert session.view().status == words.STOPPED == meta(run)["status"]
    assert meta(run)["last_step"] == 0 and 0 in checkpoint_steps(run)


def test_stopping_a_run_held_by_a_notebook_kernel_asks_through_the_control_file(tmp_path: Path) -> None:
    """A run paused in another kernel is held by that kernel's process (here: this one). Stop must never signal
    it (SIGTERM would end the kernel, here pytest); it sets the control file's stop flag instead."""
    kernel = TrainingSession(roots=[tmp_path / "runs"], poll_every=0.1)
    viewer = TrainingSession(roots=[tmp_path / "runs"], poll_every=0.1)
    try:
        kernel.step(make_plan(tmp_path / "runs", "held"), 2)
        assert kernel.wait(120) and kernel.view().status == words.PAUSED
        run = tmp_path / "runs" / "held"
        viewer.reattach(run)
        assert viewer.stop() == ("Stop requested (stop flag in control.json): the detached run stops after its "
                                 "current step.")
        assert json.loads((run / "control.json").read_text())["stop"] is True
        viewer.close()
        assert kernel.start(None).startswith("Continuing held")  # the paused kernel goes on: and stops
        assert kernel.wait(120)
        assert kernel.view().status == words.STOPPED == meta(run)["status"]
    finally:
        viewer.close()
        kernel.close()


def test_start_refuses_an_existing_run_name_without_a_traceback(session: TrainingSession, tmp_path: Path) -> None:
    (tmp_path / "runs" / "taken").mkdir(parents=True)
    session.start(make_plan(tmp_path / "runs", "taken"))
    assert session.wait(60)
    view = session.view()
    assert view.status == IDLE and view.message.startswith("Could not start:") and "taken" in view.message


def test_cadence_change_reaches_an_in_process_run(session: TrainingSession, tmp_path: Path) -> None:
    plan = make_plan(tmp_path / "runs", "cadence", **{"optim.steps": 2000})
    session.set_cadences(plan.cadences, origin="tiny")  # the sliders' positions when the notebook opened
    session.start(plan)
    wait_until(lambda: session.view().step >= 2, what="two steps")
    # The preset switched to `small` for the next run: its sliders are rebuilt at small's cadences, which are
    # recorded, not sent; moving one of them then is sent, alone.
    small = {k: int(getattr(preset("small").diagnostics, k)) for k in plan.cadences}
    assert small != plan.cadences and session.set_cadences(small, origin="small") is None
    session.set_cadences({**small, "basic_every_steps": 3}, origin="small")
    run = tmp_path / "runs" / "cadence"
    wait_until(lambda: any(r.get("event") == "cadence" for r in iter_rows(run / "metrics.jsonl")),
               what="the cadence event row")
    session.stop()
    assert session.wait(120)
    rows = [r for r in iter_rows(run / "metrics.jsonl") if r.get("event") == "cadence"]
    assert len(rows) == 1 and rows[0]["basic_every_steps"] == 3
    assert all(rows[0].get(k, v) == v for k, v in plan.cadences.items() if k != "basic_every_steps")


def test_launch_detached_list_reattach_cadence_stop(session: TrainingSession, tmp_path: Path) -> None:
    runs_dir = tmp_path / "runs"
    plan = make_plan(runs_dir, "far", **{"optim.steps": 5000})
    run = runs_dir / "far"
    session.set_cadences(plan.cadences)
    assert session.launch_detached(plan).startswith("Launched pid")
    launched = session.state.launched
    with killed_if_left(launched):
        # Listed afresh on demand: the run appears once its writer holds it
        wait_until(lambda: [r.path for r in session.running_runs()] == [run], what="the run in the list")
        other = TrainingSession(roots=[runs_dir], poll_every=0.1)  # another kernel, or this page reloaded
        try:
            assert other.reattach(run) == f"Following {run}"
            wait_until(lambda: other.view().step >= 3, what="steps seen by the reattached session")
            other.set_cadences(plan.cadences)
            other.set_cadences({**plan.cadences, "representation_every_steps": 7})
            wait_until(lambda: any(r.get("event") == "cadence" for r in iter_rows(run / "metrics.jsonl")),
                       what="the cadence event row")
            assert other.stop().startswith("Stop requested (SIGTERM to pid")
            assert other.wait(120)
            assert other.view().status == words.STOPPED
        finally:
            other.close()
        assert session.wait(120)  # the launching session saw the same end
        assert launched.process.wait(60) == 0
    view = session.view()
    assert view.status == words.STOPPED == meta(run)["status"]
    assert view.step == meta(run)["last_step"] and view.step in checkpoint_steps(run)
    assert view.message == f"stopped at step {view.step} of 5000."
    assert session.running_runs() == []


def test_resume_goes_on_with_a_stopped_run_to_its_end(session: TrainingSession, tmp_path: Path) -> None:
    runs_dir = tmp_path / "runs"
    run = runs_dir / "again"
    session.step(make_plan(runs_dir, "again", **{"optim.steps": 12}), 5)
    assert session.wait(120)
    assert session.resumable_runs() == []  # paused: its trainer is open here, Step N / Start go on with it
    session.stop()
    assert session.wait(120) and meta(run)["status"] == words.STOPPED and meta(run)["last_step"] == 5
    assert [r.path for r in session.resumable_runs()] == [run]
    said = session.resume(run)
    assert said.startswith("Resuming again from its latest checkpoint (it was stopped at step 5): pid ")
    launched = session.state.launched
    with killed_if_left(launched):
        assert session.wait(120)
        assert launched.process.wait(60) == 0
    view = session.view()
    assert view.status == words.FINISHED == meta(run)["status"] and view.step == 12 == meta(run)["last_step"]
    assert view.message == "finished at step 12 of 12."
    resumed = [r["step"] for r in iter_rows(run / "metrics.jsonl") if r.get("attempt") == 2 and "step" in r]
    assert resumed and min(resumed) > 5  # the second attempt went on from step 5's checkpoint
    assert session.resumable_runs() == []  # finished: nothing to go on with
    assert session.resume(run) == f"{run} is finished: only a stopped or crashed run can be resumed."


def test_a_resume_that_cannot_start_says_why(session: TrainingSession, tmp_path: Path) -> None:
    runs_dir = tmp_path / "runs"
    run = runs_dir / "broken"
    session.step(make_plan(runs_dir, "broken"), 2)
    assert session.wait(120)
    session.stop()
    assert session.wait(120) and meta(run)["status"] == words.STOPPED
    (run / "config.toml").write_text("[optim\n")  # damaged after the run stopped
    session.resume(run)
    launched = session.state.launched
    with killed_if_left(launched):
        assert session.wait(120) and launched.process.wait(60) != 0
    view = session.view()
    assert view.status == words.STOPPED == meta(run)["status"]  # the run is as it was
    assert view.message.startswith(f"The resume process exited with code {launched.returncode} before it took "
                                   "the run: ")
    assert "config.toml" in view.message


def test_a_resumed_run_is_not_read_from_its_old_meta_when_the_trainer_takes_it_between_two_reads(
        session: TrainingSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The race CI met once in test_resume_goes_on_with_a_stopped_run_to_its_end: the follower read the stopped
    # run's meta, the resumed trainer then took the run (a new meta and stamp), and the follower, reading the stamp
    # after the meta, took the old "stopped" for the resumed run's end. Here the run's meta.json moves on at every
    # read (stopped at launch, running, finished), so a read-order slip shows every time.
    import jepa_core.workbench.following as following
    from jepa_core.workbench.detached import DetachedRun
    from jepa_core.workbench.runs import RunInfo

    run = tmp_path / "runs" / "again"
    run.mkdir(parents=True)
    states = [(1, words.STOPPED, 5), (2, words.RUNNING, 8), (3, words.FINISHED, 12)]
    reads = []

    def now() -> tuple[int, str, int]:
        state = states[min(len(reads), len(states) - 1)]
        reads.append(state)
        return state

    def read_info(path: Path) -> RunInfo:
        _, status, step = now()
        return RunInfo(path.name, path, status, step, None)

    monkeypatch.setattr(following, "meta_stamp", lambda path: now()[0])
    monkeypatch.setattr(following, "run_info", read_info)
    launched = DetachedRun(pid=0, run_dir=run, log_path=tmp_path / "again.log", resumed=True, launch_stamp=1)
    with session.state.lock:
        session.detached.follow_run(run, launched, words.RUNNING, "", "Resuming again")
    assert session.wait(30)
    assert session.view().status == words.FINISHED
