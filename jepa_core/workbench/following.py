"""`FollowingSession`: what a training session does with a run another process trains.

Such a run is "detached": either launched here (a `jepa train` process, jepa_core.workbench.detached: a new run, or
a stopped or crashed one resumed from its latest checkpoint) or reattached to (a run an earlier kernel or a terminal
started). Either way a job thread follows its run directory, reading only the bytes appended since it last looked,
until the run ends, its process exits or the session moves on; Stop reaches the process through control.json or one
SIGTERM.
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


class FollowingSession(SessionState):
    """Launch detached, list running runs and reattach, follow, stop: runs this session does not train itself."""

    # ------------------------------------------------------------------------------------------------ reading
    def running_runs(self) -> list[RunInfo]:
        """Runs a live writer holds now, listed afresh on each call (a run launched a moment ago included)."""
        return [r for r in discover_runs(self._roots_here()) if r.status in words.LIVE]

    def resumable_runs(self) -> list[RunInfo]:
        """Ended runs that can go on (stopped, stopped on an alert, crashed) and hold a checkpoint to go on from."""
        return [r for r in discover_runs(self._roots_here())
                if r.status in words.RESUMABLE - words.LIVE and any((r.path / "checkpoints").glob("step_*.pt"))]

    def _roots_here(self) -> list[Path]:
        return list(dict.fromkeys([*map(Path, self.roots), *([self._run_dir.parent] if self._run_dir else [])]))

    # ------------------------------------------------------------------------------------------------ actions
    def launch_detached(self, plan: Plan | None) -> str:
        """Start a `jepa train` process for the plan and follow it."""
        with self._lock:
            self._launch(plan)
        return self._published_message()

    def resume(self, path: str | Path) -> str:
        """Go on with a stopped or crashed run from its latest checkpoint, in a `jepa train --resume` process, and
        follow it."""
        with self._lock:
            self._resume(Path(path))
        return self._published_message()

    def rewind(self, parent: str | Path, alert: Mapping[str, Any], changes: Mapping[str, Any],
               name: str = "") -> str:
        """Branch `parent` from the checkpoint before `alert` (a row of its alert table: step, rule, severity) with
        `changes` (`section.key` -> value), as `jepa rewind --alert` does; train the branch in a detached `jepa
        train --resume` and follow it. The parent is only read."""
        with self._lock:
            self._rewind(Path(parent), alert, changes, name)
        return self._published_message()

    def reattach(self, path: str | Path) -> str:
        """Follow a run another process (or an earlier kernel) is writing."""
        with self._lock:
            self._reattach(Path(path))
        return self._published_message()

    # ------------------------------------------------------------------------------------------------ jobs
    def _launch(self, plan: Plan | None) -> None:
        refusal = self._refusal(plan)
        if refusal:
            self._say(refusal)
            return
        name = plan.name or default_run_name()
        earlier = self._detached
        if earlier is not None and not earlier.exited() and earlier.run_dir == Path(plan.cfg.logging.runs_dir) / name:
            # the same launch asked twice (a double click): a second process would die on the taken name and
            # overwrite the first one's console log
            self._say(f"pid {earlier.pid} is already training {earlier.run_dir}; pick another name for a second run.")
            return
        self._end_follow()
        try:
            launched = launch_detached(plan.cli_overrides(), name, plan.preset, plan.cfg.logging.runs_dir)
        except FileExistsError as exc:
            self._say(str(exc))
            return
        self._detached, self._trainer, self._stop_asked, self._stop_signalled = launched, None, False, ""
        self._plan_at_start = bool(plan.cfg.eval.at_start)
        self._switch(DETACHED, launched.run_dir, plan.cfg.optim.steps)
        self._set(words.RUNNING, BUILDING, f"Launched pid {launched.pid}: {launched.run_dir} "
                                           f"(its console log: {launched.log_path})")
        self._begin(self._follow)

    def _resume(self, path: Path) -> None:
        if self._mode == IN_PROCESS and (self.busy or self._trainer is not None):
            self._say("An in-process run is open here: Stop it before resuming another.")
            return
        info = run_info(path)
        if info.status not in words.RESUMABLE - words.LIVE:
            self._say(f"{path} is {info.status}: only a stopped or crashed run can be resumed.")
            return
        self._end_follow()
        launched = resume_detached(path)
        self._follow_run(path, launched, words.RUNNING, BUILDING,
                         f"Resuming {path.name} from its latest checkpoint (it was {info.status} at step "
                         f"{info.steps}): pid {launched.pid}, console log {launched.log_path}")

    def _rewind(self, parent: Path, alert: Mapping[str, Any], changes: Mapping[str, Any], name: str) -> None:
        if self._mode == IN_PROCESS and (self.busy or self._trainer is not None):
            self._say("An in-process run is open here: Stop it before rewinding (the branch trains detached).")
            return
        try:
            number = alert_number(parent, alert)
            plan = plan_branch(parent, alert=number, overrides=form_overrides(changes), name=name.strip() or None)
            branch = create_branch(plan).root
        except (ValueError, CheckpointError, FileExistsError, OSError) as exc:  # ConfigError is a ValueError
            self._say(f"Could not rewind: {exc}")
            return
        self._end_follow()
        launched = resume_detached(branch)
        changed = ", ".join(f"{k} = {v}" for k, v in plan.changes.items()) or "no changes"
        self._follow_run(branch, launched, words.RUNNING, BUILDING,
                         f"Rewound {parent.name} to step {plan.step} as {branch.name} ({changed}): pid "
                         f"{launched.pid}, console log {launched.log_path}")

    def _reattach(self, path: Path) -> None:
        if self._mode == IN_PROCESS and (self.busy or self._trainer is not None):
            self._say("An in-process run is open here: Stop it before reattaching.")
            return
        self._end_follow()
        self._follow_run(path, None, run_info(path).status, "", f"Following {path}")

    def _follow_run(self, path: Path, launched: DetachedRun | None, status: str, phase: str, message: str) -> None:
        """Show and follow a run that exists on disk (caller holds the lock)."""
        try:
            config = read_config_file(path / "config.toml")
        except ValueError:
            config = {}
        self._detached, self._trainer, self._stop_asked, self._stop_signalled = launched, None, False, ""
        self._plan_at_start = bool(config.get("eval", {}).get("at_start", True))
        self._switch(DETACHED, path, int(config.get("optim", {}).get("steps", 0) or 0))
        self._set(status, phase, message)
        self._begin(self._follow)

    def _follow(self) -> None:
        """Follow a detached run until it ends, its process exits, or the session moves on."""
        while not self._cancel.is_set():
            path = self._run_dir
            if self._live is None and (path / "meta.json").is_file():
                self._live = LiveRun(path)
            self._poll_live()
            # In this order, or a resumed run is misread: a process seen running may still take the run, and the
            # meta read after its stamp is at least as new as the stamp (read the other way round, a stopped
            # run's old meta could pass for what the resumed trainer, which took it meanwhile, wrote).
            launched = self._detached
            exited = launched is not None and launched.exited()
            stamp = meta_stamp(path)
            info = run_info(path)
            with self._lock:
                ended = self._follow_step(info, launched, exited, stamp)
            self._publish()
            if ended:
                break
            self._cancel.wait(self._poll_every)

    def _follow_step(self, info: RunInfo, launched: DetachedRun | None, exited: bool, stamp: int | None) -> bool:
        """Update progress from the followed run (caller holds the lock): its meta (`info`), the followed process
        and whether it had exited, and the meta's stamp, each read before the next. True when following is over."""
        self._step = int(info.steps or 0)
        if launched is not None and launched.resumed and stamp == launched.launch_stamp:
            # The run's meta still holds its old end: the resumed trainer has not taken the run yet
            if not exited:
                return False
            self._set(info.status, "", f"The resume process exited with code {launched.returncode} before it took "
                                       f"the run: {launched.log_tail() or 'no output'}")
            return True
        if info.status in words.ENDED:
            self._set(info.status, "", f"{info.status} at step {self._step} of {self._total}.")
            return True
        if exited and info.status not in words.LIVE:  # it never wrote a run directory (or its meta is damaged)
            why = "after Stop" if self._stop_asked else f"with code {launched.returncode}"
            self._set(words.STOPPED if self._stop_asked and info.status == words.UNKNOWN else info.status, "",
                      f"The detached process exited {why} before its run started: {launched.log_tail() or 'no output'}")
            return True
        if launched is None and info.status not in words.LIVE:
            self._set(info.status, "", f"{self._run_dir} is {info.status}: nothing to follow.")
            return True
        if info.status not in words.LIVE:  # launched, still building its data: no meta.json yet
            return False
        if not self._on_disk:  # its writer holds it now: a list of running runs should show it
            self._on_disk = True
            self._epoch += 1
        if self._stop_asked:
            self._stop_detached()
        self._flush_cadences()
        if self._live is None or self._live.table.last_step is None:
            phase = STARTING
        elif self._step > 0:
            phase = TRAINING
        else:
            phase = "evaluating step 0" if self._plan_at_start else STARTING
        self._set(info.status, phase)
        return False

    def _stop_detached(self) -> str:
        """Ask the followed run to stop; a SIGTERM is sent once only (a second one ends a trainer at once)."""
        if not self._stop_signalled:
            how = stop_detached(self._detached, self._run_dir)
            self._stop_signalled = how if how.startswith("SIGTERM") else ""
            return how
        return self._stop_signalled

    def _end_follow(self) -> None:
        """Stop following a detached run (it keeps training); caller holds the lock."""
        if self._mode == DETACHED and self.busy:
            self._cancel.set()
            self._lock.release()
            try:
                self._idle.wait(10)
            finally:
                self._lock.acquire()
        self._cancel.clear()
