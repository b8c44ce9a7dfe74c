import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="JEPA training workbench")


@app.cell
def _():
    import queue
    import threading
    import time
    from pathlib import Path

    import marimo as mo

    from jepa_core import charts, runs
    from jepa_core.config import CADENCE_KEYS, apply_overrides, preset, validate
    from jepa_core.control import write_control
    from jepa_core.rundir import finish_meta

    return (
        CADENCE_KEYS,
        Path,
        apply_overrides,
        charts,
        finish_meta,
        mo,
        preset,
        queue,
        runs,
        threading,
        time,
        validate,
        write_control,
    )


@app.cell
def _(mo):
    mo.md("""
    # JEPA training workbench
    Configure a run, then **Start** (trains here, in a background thread), **Step N** (advance N steps and
    pause), or **Launch detached** (a separate `jepa train` process that keeps going when this tab closes;
    reattach to it below). Cadence sliders act on the running run from its next step.
    """)
    return


@app.cell
def _(mo, preset):
    _tiny = preset("tiny")
    form = mo.ui.dictionary(
        {
            "preset": mo.ui.dropdown(["tiny", "small"], value="tiny", label="model size (preset)"),
            "data.dataset": mo.ui.dropdown(["shapes", "folder", "npz"], value=_tiny.data.dataset, label="dataset"),
            "data.path": mo.ui.text(value="", label="data path (folder / .npz)"),
            "optim.steps": mo.ui.number(start=1, stop=10_000_000, value=_tiny.optim.steps, label="steps"),
            "optim.batch_size": mo.ui.number(start=1, stop=8192, value=_tiny.optim.batch_size, label="batch size"),
            "optim.lr": mo.ui.number(start=1e-7, stop=1.0, step=1e-5, value=_tiny.optim.lr, label="learning rate"),
            "ema.start": mo.ui.number(start=0.0, stop=1.0, step=1e-4, value=_tiny.ema.start, label="EMA momentum start"),
            "ema.end": mo.ui.number(start=0.0, stop=1.0, step=1e-4, value=_tiny.ema.end, label="EMA momentum end"),
            "ema.schedule": mo.ui.dropdown(["linear", "cosine"], value=_tiny.ema.schedule, label="EMA schedule"),
            "masks.target_scale": mo.ui.range_slider(
                0.05, 0.5, step=0.01, value=list(_tiny.masks.target_scale), label="target block scale", show_value=True
            ),
            "masks.context_scale": mo.ui.range_slider(
                0.3, 1.0, step=0.01, value=list(_tiny.masks.context_scale), label="context block scale", show_value=True
            ),
            "runtime.device": mo.ui.dropdown(["auto", "cpu", "cuda"], value="auto", label="device (auto: CUDA if present)"),
            "logging.name": mo.ui.text(value="", placeholder="timestamp", label="run name"),
        }
    )
    return (form,)


@app.cell
def _(CADENCE_KEYS, mo, preset):
    _defaults = preset("tiny").diagnostics
    _stops = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000]
    cadences = mo.ui.dictionary(
        {
            _key: mo.ui.slider(
                steps=sorted(set(_stops) | {getattr(_defaults, _key)}),
                value=getattr(_defaults, _key),
                label=_key,
                show_value=True,
            )
            for _key in CADENCE_KEYS
        }
    )
    faults = mo.ui.dictionary(
        {
            "faults.start_step": mo.ui.number(start=0, stop=10_000_000, value=0, label="faults start at step"),
            "faults.mask_leak_fraction": mo.ui.slider(0.0, 1.0, step=0.05, value=0.0, label="mask leak fraction", show_value=True),
            "faults.frozen_target": mo.ui.switch(value=False, label="frozen target encoder"),
            "faults.target_copies_online": mo.ui.switch(value=False, label="target copies online"),
            "faults.target_gradients": mo.ui.switch(value=False, label="gradients reach target"),
            "faults.lr_blowup_factor": mo.ui.number(start=0.1, stop=1e6, value=1.0, label="lr blow-up factor"),
            "faults.collapse_weight": mo.ui.number(start=0.0, stop=100.0, step=0.1, value=0.0, label="collapse weight"),
        }
    )
    return cadences, faults


@app.cell
def _(cadences, faults, form, mo):
    mo.ui.tabs(
        {
            # The children are views of the dictionaries: laid out one per line, they still update them.
            "config": mo.vstack(list(form.elements.values())),
            "diagnostic cadences (live)": mo.vstack(list(cadences.elements.values())),
            "fault injection": mo.vstack(list(faults.elements.values())),
        }
    )
    return


@app.cell
def _(mo, threading):
    # One mutable holder shared by the cells and the training thread; cells never re-create it.
    session = {
        "commands": None,  # queue.Queue of ("start" | "step" | "follow", arg), read by the supervisor thread
        "trainer": None,  # in-process Trainer (kept between Step N clicks)
        "stop": threading.Event(),
        "mode": None,  # "thread" | "detached"
        "run_dir": None,
        "live": None,  # runs.LiveRun on run_dir
        "pid": None,  # detached process id
        "launched": None,  # runs.DetachedRun started from this notebook (None after a reattach)
        "pending": None,  # (preset name, overrides, Config) from the form
        "written_cadences": {},
        "busy": False,
        "progress": {"step": 0, "total": 0, "eta": None, "status": "idle", "tick": 0},
    }
    get_progress, set_progress = mo.state(session["progress"])
    return get_progress, session, set_progress


@app.cell
def _(apply_overrides, cadences, charts, faults, form, mo, preset, runs, session, validate):
    # The config the next Start / Launch uses. Stored in the holder, not returned, so that editing the
    # form never re-runs (and so never interrupts) the cells that own training.
    _values = {k: v for k, v in form.value.items() if k != "preset"}
    if _values["data.dataset"] == "shapes":
        _values.pop("data.path")
    _values.update({f"diagnostics.{k}": int(v) for k, v in cadences.value.items()})
    _values.update(faults.value)
    _values["optim.lr"] = float(_values["optim.lr"])
    try:
        _overrides = runs.form_overrides(_values)
        _cfg = validate(apply_overrides(preset(form.value["preset"]), _overrides))
    except ValueError as _exc:
        session["pending"] = None
        _out = mo.callout(mo.md(f"**Config error**: {charts.safe_text(_exc)}"), kind="danger")
    else:
        session["pending"] = (form.value["preset"], _overrides, _cfg)
        _out = mo.md(
            f"Config OK: run **{charts.safe_text(_cfg.logging.name or '(timestamp)')}**, {_cfg.optim.steps} steps, "
            f"batch {_cfg.optim.batch_size}, device {_cfg.runtime.device}."
        )
    _out
    return


@app.cell
def _(mo, queue, session, set_progress, time):
    class StopFlag:
        """The trainer's stop event: set by Stop, or when marimo asks the thread to exit."""

        def __init__(self, event, thread):
            self.event, self.thread = event, thread

        def is_set(self):
            return self.event.is_set() or self.thread.should_exit

    def publish(status, step=None, total=None, eta=None):
        # Reads the last value from the holder, not from get_progress: a cell that reads the getter
        # re-runs on every update, which would restart (and so stop) the supervisor thread.
        _old = session["progress"]
        session["progress"] = {
            "step": _old["step"] if step is None else step,
            "total": _old["total"] if total is None else total,
            "eta": eta,
            "status": status,
            "tick": _old["tick"] + 1,
        }
        set_progress(session["progress"])

    def train_in_process(max_steps):
        """Run (or continue) the in-process trainer; metrics reach the UI at most once a second."""
        from jepa_core.train import Trainer

        thread = mo.current_thread()
        if session["trainer"] is None:
            _preset, _overrides, _cfg = session["pending"]
            publish("building model and data", step=0, total=_cfg.optim.steps)
            _cfg.logging.progress_bar = False
            trainer = Trainer(_cfg, quiet=True, progress=False)
            session.update(trainer=trainer, mode="thread", run_dir=trainer.paths.root, written_cadences={})
            from jepa_core.runs import LiveRun

            session["live"] = LiveRun(trainer.paths.root)
        trainer = session["trainer"]
        total = trainer.cfg.optim.steps
        last = [0.0]

        def on_metrics(step, metrics):
            now = time.monotonic()
            if now - last[0] >= 1.0:
                last[0] = now
                publish("running", step=step, total=total, eta=metrics.get("time/eta_seconds"))

        publish("running", step=trainer.step, total=total)
        status = trainer.run(StopFlag(session["stop"], thread), on_metrics, max_steps)
        if status != "paused":
            session["trainer"] = None
        publish(status, step=trainer.step, total=total)

    def follow_detached(run_dir, total):
        """Follow a run written by another process until it ends or another command arrives."""
        from jepa_core.runs import LiveRun, pid_alive, run_info

        thread = mo.current_thread()
        live = session["live"] = LiveRun(run_dir)
        while not thread.should_exit and session["commands"].empty():
            changed = live.poll()
            scalars = live.table.scalars
            step = int(scalars["step"].max()) if len(scalars) else 0
            eta_col = scalars.get("time/eta_seconds")
            eta = None if eta_col is None or eta_col.dropna().empty else float(eta_col.dropna().iloc[-1])
            info = run_info(run_dir)
            if info.status in ("finished", "crashed"):
                publish(f"detached run {info.status}", step=step, total=total)
                return
            _launched = session["launched"]
            _gone = _launched.exited() if _launched is not None else not pid_alive(session["pid"])
            if session["pid"] is not None and _gone and info.status in ("unknown", "running"):
                publish("detached process exited: see its log in runs/.logs/", step=step, total=total)
                return
            if changed:
                publish("running (detached)", step=step, total=total, eta=eta)
            time.sleep(1.0)

    def supervise():
        """The one thread that trains or follows; commands arrive through the queue."""
        thread = mo.current_thread()
        while not thread.should_exit:
            try:
                command, arg = session["commands"].get(timeout=0.2)
            except queue.Empty:
                continue
            session["busy"] = True
            session["stop"].clear()
            try:
                if command in ("start", "step"):
                    train_in_process(None if command == "start" else arg)
                elif command == "follow":
                    follow_detached(*arg)
            except Exception as exc:  # shown in the UI (a crashed run is marked so in its meta.json)
                session["trainer"] = None
                publish(f"error: {type(exc).__name__}: {exc}")
            finally:
                session["busy"] = False

    return (supervise,)


@app.cell
def _(mo, queue, session, supervise):
    # Started once per session (never in script or test mode, where nothing would drive it).
    if session["commands"] is None:
        session["commands"] = queue.Queue()
    if mo.app_meta().mode in ("edit", "run"):
        _supervisor = mo.Thread(target=supervise, daemon=True, name="jepa-supervisor")
        _supervisor.start()
    return


@app.cell
def _(mo, runs):
    start_button = mo.ui.run_button(label="Start", kind="success")
    stop_button = mo.ui.run_button(label="Stop", kind="danger")
    step_count = mo.ui.number(start=1, stop=100_000, value=10, label="N")
    step_button = mo.ui.run_button(label="Step N")
    detach_button = mo.ui.run_button(label="Launch detached")
    _running = {f"{r.name} ({r.path.parent})": str(r.path) for r in runs.discover_runs() if r.status == "running"}
    attach_choice = mo.ui.dropdown(options=_running, label="running runs")
    attach_button = mo.ui.run_button(label="Reattach", disabled=not _running)
    mo.vstack(
        [
            mo.hstack([start_button, stop_button, step_count, step_button], justify="start"),
            mo.hstack([detach_button, attach_choice, attach_button], justify="start"),
        ]
    )
    return attach_button, attach_choice, detach_button, start_button, step_button, step_count, stop_button


@app.cell
def _(mo, session, start_button):
    # Commands only enqueue: the supervisor thread does the work, so no cell here ever blocks the UI.
    mo.stop(not start_button.value)
    if session["busy"]:
        _msg = "Already training: Stop first."
    elif session["pending"] is None:
        _msg = "Fix the config first."
    else:
        session["commands"].put(("start", None))
        _msg = "Starting."
    mo.md(_msg)
    return


@app.cell
def _(mo, session, step_button, step_count):
    mo.stop(not step_button.value)
    if session["busy"]:
        _msg = "Busy: Stop first."
    elif session["pending"] is None and session["trainer"] is None:
        _msg = "Fix the config first."
    else:
        session["commands"].put(("step", int(step_count.value)))
        _msg = f"Stepping {int(step_count.value)}."
    mo.md(_msg)
    return


@app.cell
def _(finish_meta, mo, session, stop_button, write_control):
    mo.stop(not stop_button.value)
    session["stop"].set()  # an in-process run stops after its current step
    if session["mode"] == "detached" and session["run_dir"] is not None:
        write_control(session["run_dir"], stop=True)  # the detached trainer reads this after its next step
    _paused = session["trainer"]
    if _paused is not None and not session["busy"]:
        # A run paused by Step N is closed here (nothing is stepping it).
        _paused.save()
        finish_meta(_paused.paths, "stopped", _paused.step)
        _paused.close()
        session["trainer"] = None
    mo.md("Stop requested.")
    return


@app.cell
def _(charts, detach_button, mo, runs, session, time):
    mo.stop(not detach_button.value)
    if session["busy"] or session["pending"] is None:
        _msg = "Busy or config invalid."
    else:
        _preset, _overrides, _cfg = session["pending"]
        _name = _cfg.logging.name or time.strftime("%Y%m%d-%H%M%S")
        try:
            _run = runs.launch_detached([o for o in _overrides if not o.startswith("logging.name=")], _name, _preset,
                                        _cfg.logging.runs_dir)
        except FileExistsError as _exc:
            _msg = str(_exc)
        else:
            session.update(
                mode="detached", run_dir=_run.run_dir, pid=_run.pid, launched=_run, written_cadences={}, trainer=None
            )
            session["commands"].put(("follow", (_run.run_dir, _cfg.optim.steps)))
            _msg = f"Launched pid {_run.pid}: {_run.run_dir}"
    mo.md(charts.safe_text(_msg))
    return


@app.cell
def _(Path, attach_button, attach_choice, charts, mo, runs, session):
    mo.stop(not attach_button.value or attach_choice.value is None)
    _dir = Path(attach_choice.value)
    _summary = runs.load_run_summary(_dir, with_verdict=False)
    _total = int(_summary.meta.get("total_steps") or 0)
    session.update(
        mode="detached", run_dir=_dir, pid=_summary.meta.get("pid"), launched=None, written_cadences={}, trainer=None
    )
    session["commands"].put(("follow", (_dir, _total)))
    mo.md(f"Following {charts.safe_text(_dir)}")
    return


@app.cell
def _(cadences, session, write_control):
    # Moving a cadence slider during a run writes the run's control file; the trainer (in-process or
    # detached) picks it up after its current step. Only changed keys are written.
    _changes = {
        k: int(v) for k, v in cadences.value.items() if session["written_cadences"].get(k, None) != int(v)
    }
    _active = session["busy"] or session["mode"] == "detached" or session["trainer"] is not None
    if session["run_dir"] is not None and _changes and _active:
        write_control(session["run_dir"], **_changes)
        session["written_cadences"].update(_changes)
    return


@app.cell
def _(charts, get_progress, mo, session):
    _p = get_progress()
    _live = session["live"]
    if _live is not None:
        _live.poll()
    _parts = [mo.Html(charts.progress_html(_p["step"], _p["total"], _p["eta"], _p["status"]))]
    if session["run_dir"] is not None:
        _parts.append(mo.md(f"run directory: {charts.safe_text(session['run_dir'])}"))
    if _live is not None:
        _alerts = charts.alert_table(_live.table)
        if len(_alerts):
            _lines = [
                f"- step {int(r.step)} **{charts.safe_text(r.severity)}** {charts.safe_text(r.rule)}: "
                f"{charts.safe_text(r.message)}"
                for r in _alerts.tail(3).itertuples()
            ]
            _parts.append(
                mo.callout(mo.md(f"**{len(_alerts)} alert(s)**, latest:\n\n" + "\n".join(_lines)), kind="danger")
            )
    mo.vstack(_parts)
    return


@app.cell
def _(charts, get_progress, mo, session):
    get_progress()
    _live = session["live"]
    mo.stop(_live is None, mo.md("Charts appear once a run starts."))
    mo.vstack(
        [
            charts.group_chart(_live.table, "optimisation", smoothing=0.6, max_points=400),
            charts.early_warning_charts(_live.table, max_points=400),
        ]
    )
    return


@app.cell
def _(charts, get_progress, mo, session):
    get_progress()
    _trainer = session["trainer"]
    _image = charts.current_mask_overlay(_trainer, session["run_dir"])
    mo.stop(_image is None)
    mo.vstack([mo.md("Current batch: context (visible) and target blocks"), mo.image(_image, width=512)])
    return


if __name__ == "__main__":
    app.run()
