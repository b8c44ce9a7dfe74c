"""`DetachedRuns`: what a training session does with a run another process trains.

Such a run is "detached": either launched here (a `jepa train` process, jepa_core.workbench.detached: a new run, or
a stopped or crashed one resumed from its latest checkpoint, or a branch rewound from an alert) or reattached to (a
run an earlier kernel or a terminal started). Either way a job thread follows its run directory, reading only the
bytes appended since it last looked, until the run ends, its process exits or the session moves on; Stop reaches
the process through control.json or one SIGTERM.

`DetachedRuns` keeps no state of its own: it is handed the session's `SessionState` (jepa_core.workbench
.session_state) and changes it, as `InProcessRuns` does for runs this process trains. Its actions expect the
caller (`TrainingSession`) to hold `state.lock` and to publish the message afterwards.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from jepa_core.run import status as words
from jepa_core.run.branch import alert_number, create_branch, plan_branch
from jepa_core.run.checkpoint import CheckpointError
from jepa_core.run.rundir import default_run_name
from jepa_core.workbench.detached import DetachedRun, launch_detached, meta_stamp, resume_detached, stop_detached
from jepa_core.workbench.live import LiveRun
from jepa_core.workbench.plan import Plan, form_overrides
from jepa_core.workbench.runs import RunInfo, discover_runs, read_config_file, run_info
from jepa_core.workbench.session_state import SessionState
from jepa_core.workbench.view import BUILDING, DETACHED, IN_PROCESS, STARTING, TRAINING


class DetachedRuns:
    """Launch detached, resume, rewind, list running runs and reattach, follow, stop: runs this session does not
    train itself."""

    def __init__(self, state: SessionState) -> None:
        self.state = state

    # ------------------------------------------------------------------------------------------------ reading
    def running_runs(self) -> list[RunInfo]:
        """Runs a live writer holds now, listed afresh on each call (a run launched a moment ago included)."""
        return [r for r in discover_runs(self.roots_here()) if r.status in words.LIVE]

    def resumable_runs(self) -> list[RunInfo]:
        """Ended runs that can go on (stopped, stopped on an alert, crashed) and hold a checkpoint to go on from."""
        return [r for r in discover_runs(self.roots_here())
                if r.status in words.RESUMABLE - words.LIVE and any((r.path / "checkpoints").glob("step_*.pt"))]

    def roots_here(self) -> list[Path]:
        """The session's roots, and the shown run's parent (a run launched into another runs_dir is listed too)."""
        run_dir = self.state.run_dir
        return list(dict.fromkeys([*map(Path, self.state.roots), *([run_dir.parent] if run_dir else [])]))

    # ------------------------------------------------------------------------------------------------ actions
    # Each is called with state.lock held; the caller publishes the message afterwards.
    def launch(self, plan: Plan | None) -> None:
        """Start a `jepa train` process for the plan and follow it."""
        state = self.state
        refusal = state.refusal(plan)
        if refusal:
            state.say(refusal)
            return
        name = plan.name or default_run_name()
        earlier = state.launched
        if earlier is not None and not earlier.exited() and earlier.run_dir == Path(plan.cfg.logging.runs_dir) / name:
            # the same launch asked twice (a double click): a second process would die on the taken name and
            # overwrite the first one's console log
            state.say(f"pid {earlier.pid} is already training {earlier.run_dir}; pick another name for a second run.")
            return
        state.end_follow()
        try:
            launched = launch_detached(plan.cli_overrides(), name, plan.preset, plan.cfg.logging.runs_dir)
        except FileExistsError as exc:
            state.say(str(exc))
            return
        state.launched, state.trainer, state.stop_asked, state.stop_signalled = launched, None, False, ""
        state.plan_at_start = bool(plan.cfg.eval.at_start)
        state.switch(DETACHED, launched.run_dir, plan.cfg.optim.steps)
        state.set_status(words.RUNNING, BUILDING, f"Launched pid {launched.pid}: {launched.run_dir} "
                                                  f"(its console log: {launched.log_path})")
        state.begin(self.follow)

    def resume(self, path: Path) -> None:
        """Go on with a stopped or crashed run from its latest checkpoint, in a `jepa train --resume` process."""
        state = self.state
        if self._in_process_open():
            state.say("An in-process run is open here: Stop it before resuming another.")
            return
        info = run_info(path)
        if info.status not in words.RESUMABLE - words.LIVE:
            state.say(f"{path} is {info.status}: only a stopped or crashed run can be resumed.")
            return
        state.end_follow()
        launched = resume_detached(path)
        self.follow_run(path, launched, words.RUNNING, BUILDING,
                        f"Resuming {path.name} from its latest checkpoint (it was {info.status} at step "
                        f"{info.steps}): pid {launched.pid}, console log {launched.log_path}")

    def rewind(self, parent: Path, alert: Mapping[str, Any], changes: Mapping[str, Any], name: str) -> None:
        """Branch `parent` from the checkpoint before `alert` with `changes` and train the branch detached."""
        state = self.state
        if self._in_process_open():
            state.say("An in-process run is open here: Stop it before rewinding (the branch trains detached).")
            return
        try:
            number = alert_number(parent, alert)
            plan = plan_branch(parent, alert=number, overrides=form_overrides(changes), name=name.strip() or None)
            branch = create_branch(plan).root
        except (ValueError, CheckpointError, FileExistsError, OSError) as exc:  # ConfigError is a ValueError
            state.say(f"Could not rewind: {exc}")
            return
        state.end_follow()
        launched = resume_detached(branch)
        changed = ", ".join(f"{k} = {v}" for k, v in plan.changes.items()) or "no changes"
        self.follow_run(branch, launched, words.RUNNING, BUILDING,
                        f"Rewound {parent.name} to step {plan.step} as {branch.name} ({changed}): pid "
                        f"{launched.pid}, console log {launched.log_path}")

    def reattach(self, path: Path) -> None:
        """Follow a run another process (or an earlier kernel) is writing."""
        state = self.state
        if self._in_process_open():
            state.say("An in-process run is open here: Stop it before reattaching.")
            return
        state.end_follow()
        self.follow_run(path, None, run_info(path).status, "", f"Following {path}")

    def stop(self) -> str:
        """Ask the followed run to stop (Stop pressed while following); returns how it was asked."""
        self.state.stop_asked = True
        how = self.stop_process()
        self.state.say(f"Stop requested ({how}): the detached run stops after its current step.")
        return how

    # ------------------------------------------------------------------------------------------------ jobs
    def follow_run(self, path: Path, launched: DetachedRun | None, status: str, phase: str, message: str) -> None:
        """Show and follow a run that exists on disk (caller holds the lock)."""
        state = self.state
        try:
            config = read_config_file(path / "config.toml")
        except ValueError:
            config = {}
        state.launched, state.trainer, state.stop_asked, state.stop_signalled = launched, None, False, ""
        state.plan_at_start = bool(config.get("eval", {}).get("at_start", True))
        state.switch(DETACHED, path, int(config.get("optim", {}).get("steps", 0) or 0))
        state.set_status(status, phase, message)
        state.begin(self.follow)

    def follow(self) -> None:
        """Follow a detached run until it ends, its process exits, or the session moves on (the job's body)."""
        state = self.state
        while not state.cancel.is_set():
            path = state.run_dir
            if state.live is None and (path / "meta.json").is_file():
                state.live = LiveRun(path)
            state.poll_live()
            # In this order, or a resumed run is misread: a process seen running may still take the run, and the
            # meta read after its stamp is at least as new as the stamp (read the other way round, a stopped
            # run's old meta could pass for what the resumed trainer, which took it meanwhile, wrote).
            launched = state.launched
            exited = launched is not None and launched.exited()
            stamp = meta_stamp(path)
            info = run_info(path)
            with state.lock:
                ended = self.follow_step(info, launched, exited, stamp)
            state.publish()
            if ended:
                break
            state.cancel.wait(state.poll_every)

    def follow_step(self, info: RunInfo, launched: DetachedRun | None, exited: bool, stamp: int | None) -> bool:
        """Update progress from the followed run (caller holds the lock): its meta (`info`), the followed process
        and whether it had exited, and the meta's stamp, each read before the next. True when following is over."""
        state = self.state
        state.step = int(info.steps or 0)
        if launched is not None and launched.resumed and stamp == launched.launch_stamp:
            # The run's meta still holds its old end: the resumed trainer has not taken the run yet
            if not exited:
                return False
            state.set_status(info.status, "", f"The resume process exited with code {launched.returncode} before "
                                              f"it took the run: {launched.log_tail() or 'no output'}")
            return True
        if info.status in words.ENDED:
            state.set_status(info.status, "", f"{info.status} at step {state.step} of {state.total}.")
            return True
        if exited and info.status not in words.LIVE:  # it never wrote a run directory (or its meta is damaged)
            why = "after Stop" if state.stop_asked else f"with code {launched.returncode}"
            state.set_status(words.STOPPED if state.stop_asked and info.status == words.UNKNOWN else info.status, "",
                             f"The detached process exited {why} before its run started: "
                             f"{launched.log_tail() or 'no output'}")
            return True
        if launched is None and info.status not in words.LIVE:
            state.set_status(info.status, "", f"{state.run_dir} is {info.status}: nothing to follow.")
            return True
        if info.status not in words.LIVE:  # launched, still building its data: no meta.json yet
            return False
        if not state.on_disk:  # its writer holds it now: a list of running runs should show it
            state.on_disk = True
            state.epoch += 1
        if state.stop_asked:
            self.stop_process()
        state.flush_cadences()
        if state.live is None or state.live.table.last_step is None:
            phase = STARTING
        elif state.step > 0:
            phase = TRAINING
        else:
            phase = "evaluating step 0" if state.plan_at_start else STARTING
        state.set_status(info.status, phase)
        return False

    def stop_process(self) -> str:
        """Ask the followed run to stop; a SIGTERM is sent once only (a second one ends a trainer at once)."""
        state = self.state
        if not state.stop_signalled:
            how = stop_detached(state.launched, state.run_dir)
            state.stop_signalled = how if how.startswith("SIGTERM") else ""
            return how
        return state.stop_signalled

    def _in_process_open(self) -> bool:
        """An in-process run is training or paused here: a detached run may not replace it on screen."""
        state = self.state
        return state.mode == IN_PROCESS and (state.busy or state.trainer is not None)
