import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="JEPA training workbench", css_file="workbench.css")


@app.cell(hide_code=True)
def _():
    from pathlib import Path

    import marimo as mo

    from jepa_core.workbench import charts
    from jepa_core.workbench.branches import branch_view
    from jepa_core.config import CADENCE_KEYS, preset
    from jepa_core.workbench.clicks import ClickLedger
    from jepa_core.workbench.markup import md_text
    from jepa_core.workbench.panel import session_panel_html
    from jepa_core.workbench.plan import PRESET_NAMES, form_defaults, plan_from_form, rewind_defaults
    from jepa_core.workbench.session import TrainingSession

    return (
        CADENCE_KEYS,
        ClickLedger,
        PRESET_NAMES,
        Path,
        TrainingSession,
        branch_view,
        charts,
        form_defaults,
        md_text,
        mo,
        plan_from_form,
        preset,
        rewind_defaults,
        session_panel_html,
    )


@app.cell(hide_code=True)
def _(mo):
    # A code cell, not a markdown one: marimo's editor opens a markdown-only cell marked "outdated", which
    # lights its "run stale cells" button on a page that is ready.
    _title = mo.md("""
    # JEPA training workbench
    Configure a run, then **Start** (trains here, in a background thread), **Step N** (advance N steps and
    pause), or **Launch detached** (a separate `jepa train` process that keeps going when this tab closes;
    reattach to it below). **Resume** goes on with a stopped or crashed run from its latest checkpoint, detached.
    Cadence sliders act on the running run from its next step.
    """)
    _title
    return


@app.cell(hide_code=True)
def _(PRESET_NAMES, mo):
    preset_choice = mo.ui.dropdown(list(PRESET_NAMES), value="tiny", label="preset (the form starts from its values)")
    preset_choice
    return (preset_choice,)


@app.cell(hide_code=True)
def _(form_defaults, mo, preset_choice):
    # Built again when the preset changes: every field starts from that preset's value.
    _d = form_defaults(preset_choice.value)
    form = mo.ui.dictionary(
        {
            "data.dataset": mo.ui.dropdown(["shapes", "folder", "npz"], value=_d["data.dataset"], label="dataset"),
            "data.path": mo.ui.text(value=_d["data.path"], label="data path (folder / .npz)"),
            "data.num_train": mo.ui.number(
                start=64, stop=10_000_000, value=_d["data.num_train"], label="training images (built-in shapes)"
            ),
            "optim.steps": mo.ui.number(start=1, stop=10_000_000, value=_d["optim.steps"], label="steps"),
            "optim.warmup_steps": mo.ui.number(
                start=0, stop=10_000_000, value=_d["optim.warmup_steps"], label="lr warm-up steps"
            ),
            "optim.batch_size": mo.ui.number(start=1, stop=8192, value=_d["optim.batch_size"], label="batch size"),
            "optim.lr": mo.ui.number(start=1e-7, stop=1.0, step=1e-6, value=_d["optim.lr"], label="learning rate"),
            "ema.start": mo.ui.number(start=0.0, stop=1.0, step=1e-4, value=_d["ema.start"], label="EMA momentum start"),
            "ema.end": mo.ui.number(start=0.0, stop=1.0, step=1e-4, value=_d["ema.end"], label="EMA momentum end"),
            "ema.schedule": mo.ui.dropdown(["linear", "cosine"], value=_d["ema.schedule"], label="EMA schedule"),
            "masks.target_scale": mo.ui.range_slider(
                0.05, 0.5, step=0.01, value=_d["masks.target_scale"], label="target block scale", show_value=True
            ),
            "masks.context_scale": mo.ui.range_slider(
                0.3, 1.0, step=0.01, value=_d["masks.context_scale"], label="context block scale", show_value=True
            ),
            "eval.at_start": mo.ui.switch(value=_d["eval.at_start"], label="evaluate at step 0 (random-init baseline)"),
            "runtime.device": mo.ui.dropdown(
                ["auto", "cpu", "cuda"], value=_d["runtime.device"], label="device (auto: CUDA if present)"
            ),
            # A run in this kernel shares the machine with the notebook's server and browser: fewer threads than
            # cores keep the page responsive. 0 leaves torch's default (one per core).
            "runtime.num_threads": mo.ui.number(
                start=0, stop=1024, value=_d["runtime.num_threads"], label="CPU threads (0: torch's default)"
            ),
            "logging.name": mo.ui.text(value=_d["logging.name"], placeholder="timestamp", label="run name"),
        }
    )
    return (form,)


@app.cell(hide_code=True)
def _(CADENCE_KEYS, mo, preset, preset_choice):
    _defaults = preset(preset_choice.value).diagnostics
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


@app.cell(hide_code=True)
def _(
    cadences,
    detach_button,
    faults,
    form,
    mo,
    start_button,
    step_button,
    step_count,
    stop_button,
):
    # The buttons sit right under the fields, in this one output: Tab from the last field lands on Start. Between
    # two outputs it would land in the next cell's folded code, which unfolds, moves the buttons down, and folds
    # again under the next click's press, so that its release missed the button and the click was lost.
    mo.vstack(
        [
            mo.ui.tabs(
                {
                    # The children are views of the dictionaries: laid out one per line, they still update them.
                    "config": mo.vstack(list(form.elements.values())),
                    "diagnostic cadences (live)": mo.vstack(list(cadences.elements.values())),
                    "fault injection": mo.vstack(list(faults.elements.values())),
                }
            ),
            mo.hstack([start_button, stop_button, step_count, step_button, detach_button], justify="start"),
        ]
    )
    return


@app.cell(hide_code=True)
def _(ClickLedger, TrainingSession, mo):
    # Created once per kernel; never re-run (it depends on nothing that changes). The session's threads are
    # mo.Threads so that they may hand each new view to marimo state; cells below read it.
    get_view, set_view = mo.state(None)
    get_epoch, set_epoch = mo.state(0)  # changes only when the run or its status does: the run list
    get_rows, set_rows = mo.state(0)  # new metrics arrived, at most every 3 s: the charts (a redraw costs CPU)
    get_alerts, set_alerts = mo.state(0)  # the number of alerts: the alert table to rewind from
    session = TrainingSession(
        thread_factory=mo.Thread,
        on_change=set_view,
        watch={"epoch": set_epoch, "rows": (set_rows, 3.0), "alerts": set_alerts},
    )
    clicks = ClickLedger()  # the click counts already acted on
    return clicks, get_alerts, get_epoch, get_rows, get_view, session


@app.cell(hide_code=True)
def _(cadences, faults, form, md_text, mo, plan_from_form, preset_choice):
    # The config the next Start / Step N / Launch detached uses (None while the form holds a bad value).
    try:
        plan = plan_from_form({"preset": preset_choice.value, **form.value}, cadences.value, faults.value)
    except ValueError as _exc:
        plan = None
        _out = mo.callout(mo.md(f"**Config error**: {md_text(_exc)}"), kind="danger")
    else:
        _out = mo.md(
            f"Config OK: run **{md_text(plan.name or '(timestamp)')}**, {plan.cfg.optim.steps} steps, "
            f"batch {plan.cfg.optim.batch_size}, device {md_text(plan.cfg.runtime.device)}."
            + (f" Note: {md_text(plan.note)}." if plan.note else "")
        )
    _out
    return (plan,)


@app.cell(hide_code=True)
def _(mo):
    # Buttons count their clicks (see jepa_core.workbench.clicks): each click acts once.
    start_button = mo.ui.button(label="Start", kind="success", value=0, on_click=lambda n: n + 1)
    stop_button = mo.ui.button(label="Stop", kind="danger", value=0, on_click=lambda n: n + 1)
    step_count = mo.ui.number(start=1, stop=100_000, value=10, label="N")
    step_button = mo.ui.button(label="Step N", value=0, on_click=lambda n: n + 1)
    detach_button = mo.ui.button(label="Launch detached", value=0, on_click=lambda n: n + 1)
    relist_button = mo.ui.button(label="Refresh list", value=0, on_click=lambda n: n + 1)
    return detach_button, relist_button, start_button, step_button, step_count, stop_button


@app.cell(hide_code=True)
def _(get_epoch, mo, relist_button, session):
    # Re-listed when the session's run or status changes (a launch, an end) and on "Refresh list".
    relist_button.value
    get_epoch()
    _running = {r.label: str(r.path) for r in session.running_runs()}
    attach_choice = mo.ui.dropdown(options=_running, label="running runs")
    attach_button = mo.ui.button(label="Reattach", disabled=not _running, value=0, on_click=lambda n: n + 1)
    mo.hstack([attach_choice, attach_button, relist_button], justify="start")
    return attach_button, attach_choice


@app.cell(hide_code=True)
def _(get_epoch, mo, relist_button, session):
    # Stopped and crashed runs that hold a checkpoint, listed like the running ones: Resume goes on with one in a
    # detached `jepa train --resume` and follows it.
    relist_button.value
    get_epoch()
    _ended = {r.label: str(r.path) for r in session.resumable_runs()}
    resume_choice = mo.ui.dropdown(options=_ended, label="stopped or crashed runs")
    resume_button = mo.ui.button(label="Resume (detached)", disabled=not _ended, value=0, on_click=lambda n: n + 1)
    mo.hstack([resume_choice, resume_button], justify="start")
    return resume_button, resume_choice


@app.cell(hide_code=True)
def handle_clicks(
    Path,
    attach_button,
    attach_choice,
    clicks,
    detach_button,
    plan,
    resume_button,
    resume_choice,
    session,
    start_button,
    step_button,
    step_count,
    stop_button,
):
    # Each new click reaches the session once (this cell also runs when the run lists are rebuilt); the session's
    # threads do the work, and its message says what happened.
    _new = clicks.new(
        {
            "start": start_button.value,
            "step": step_button.value,
            "stop": stop_button.value,
            "detach": detach_button.value,
            "attach": attach_button.value,
            "resume": resume_button.value,
        }
    )
    for _click in _new:
        if _click == "start":
            session.start(plan)
        elif _click == "step":
            session.step(plan, int(step_count.value))
        elif _click == "stop":
            session.stop()
        elif _click == "detach":
            session.launch_detached(plan)
        elif _click == "attach" and attach_choice.value is not None:
            session.reattach(Path(attach_choice.value))
        elif _click == "resume" and resume_choice.value is not None:
            session.resume(Path(resume_choice.value))
    return


@app.cell(hide_code=True)
def _(cadences, preset_choice, session):
    # A moved slider goes to the open run's control.json; the trainer applies it from its next step. Sliders
    # rebuilt for another preset are only recorded: they are the next run's, not the open one's.
    _said = session.set_cadences(cadences.value, origin=preset_choice.value)  # also the session's message
    return


@app.cell(hide_code=True)
def _(charts, get_view, md_text, mo, session, session_panel_html):
    view = get_view() or session.view()
    _parts = [mo.Html(session_panel_html(view))]
    _table = session.table
    _alerts = charts.alert_table(_table) if _table is not None else []
    if len(_alerts):
        _lines = [
            f"- step {int(r.step)} **{md_text(r.severity)}** {md_text(r.rule)}: {md_text(r.message)}"
            for r in _alerts.tail(3).itertuples()
        ]
        _parts.append(mo.callout(mo.md(f"**{len(_alerts)} alert(s)**, latest:\n\n" + "\n".join(_lines)), kind="danger"))
    mo.vstack(_parts)
    return (view,)


@app.cell(hide_code=True)
def _(charts, get_alerts, get_epoch, mo, session):
    # The open run's alerts, built again only when their number or the run changes (a selection survives new rows).
    get_epoch()
    get_alerts()
    _table = session.table
    _alerts = charts.alert_table(_table) if _table is not None else []
    alert_pick = (
        mo.ui.table(_alerts, selection="single", page_size=5, label="Alerts: select one to rewind from it")
        if len(_alerts)
        else None
    )
    alert_pick
    return (alert_pick,)


@app.cell(hide_code=True)
def _(alert_pick, md_text, mo, rewind_defaults, session):
    # "Rewind here": the branch starts at the newest checkpoint one rule window before the selected alert, with
    # the parent's values below except those changed (jepa rewind --alert; the parent is only read).
    # Nothing selected: the widgets are None (no mo.stop, which would mark the click cell below as stopped).
    rewind_alert = rewind_button = rewind_form = rewind_name = rewind_run = None
    if alert_pick is not None and alert_pick.value is not None and len(alert_pick.value):
        rewind_run = session.view().run_dir
        rewind_alert = alert_pick.value.iloc[0].to_dict()
    _d = rewind_defaults(rewind_run) if rewind_run is not None else None
    rewind_form = None if _d is None else mo.ui.dictionary(
        {
            "optim.lr": mo.ui.number(start=0.0, stop=1.0, step=1e-6, value=_d["optim.lr"], label="learning rate"),
            "optim.weight_decay": mo.ui.number(
                start=0.0, stop=10.0, step=1e-4, value=_d["optim.weight_decay"], label="weight decay (start)"
            ),
            "optim.final_weight_decay": mo.ui.number(
                start=0.0, stop=10.0, step=1e-4, value=_d["optim.final_weight_decay"], label="weight decay (end)"
            ),
            "ema.start": mo.ui.number(start=0.0, stop=1.0, step=1e-4, value=_d["ema.start"], label="EMA momentum start"),
            "ema.end": mo.ui.number(start=0.0, stop=1.0, step=1e-4, value=_d["ema.end"], label="EMA momentum end"),
            "faults.mask_leak_fraction": mo.ui.slider(
                0.0, 1.0, step=0.05, value=_d["faults.mask_leak_fraction"], label="mask leak fraction", show_value=True
            ),
            "faults.frozen_target": mo.ui.switch(value=_d["faults.frozen_target"], label="frozen target encoder"),
            "faults.target_copies_online": mo.ui.switch(
                value=_d["faults.target_copies_online"], label="target copies online"
            ),
            "faults.lr_blowup_factor": mo.ui.number(
                start=0.1, stop=1e6, value=_d["faults.lr_blowup_factor"], label="lr blow-up factor"
            ),
            "faults.collapse_weight": mo.ui.number(
                start=0.0, stop=100.0, step=0.1, value=_d["faults.collapse_weight"], label="collapse weight"
            ),
        }
    )
    if rewind_form is not None:
        rewind_name = mo.ui.text(placeholder=f"{rewind_run.name}-from-STEP", label="branch name")
        rewind_button = mo.ui.button(label="Rewind here (detached)", kind="warn", value=0, on_click=lambda n: n + 1)
    mo.vstack(
        [] if rewind_form is None else [
            mo.md(
                f"**Rewind from the {md_text(rewind_alert['severity'])} {md_text(rewind_alert['rule'])} at step "
                f"{int(rewind_alert['step'])}** of {md_text(rewind_run.name)}: a new run beside it continues from "
                "the newest checkpoint one rule window before the alert, with these values (the parent's unless "
                "changed), and trains detached."
            ),
            mo.hstack(list(rewind_form.elements.values())[:5], justify="start", wrap=True),
            mo.hstack(list(rewind_form.elements.values())[5:], justify="start", wrap=True),
            mo.hstack([rewind_name, rewind_button], justify="start"),
        ]
    )
    return rewind_alert, rewind_button, rewind_form, rewind_name, rewind_run


@app.cell(hide_code=True)
def handle_rewind(clicks, rewind_alert, rewind_button, rewind_form, rewind_name, rewind_run, session):
    # One branch per click (see handle_clicks); the session follows the branch once it is launched.
    if rewind_button is not None and clicks.new({"rewind": rewind_button.value}):
        session.rewind(rewind_run, rewind_alert, rewind_form.value, rewind_name.value)
    return


@app.cell(hide_code=True)
def _(branch_view, get_rows, md_text, mo, session):
    # A branch (made here or by `jepa rewind`) over its parent, aligned by step, the branch point dashed.
    get_rows()
    _run, _table = session.view().run_dir, session.table
    _view = branch_view(_run, _run.name, _table, max_points=400) if _run is not None and _table is not None else None
    mo.stop(_view is None)
    mo.vstack([mo.md(f"Branch of **{md_text(_view[0])}** at step {_view[1]}"), _view[2]])
    return


@app.cell(hide_code=True)
def _(charts, get_rows, mo, session):
    # Redrawn only when new metrics arrived (building the charts costs the CPU the trainer is using).
    _table = session.table
    mo.stop(_table is None or not get_rows(), mo.md("Charts appear once a run logs its first metrics."))
    mo.vstack(
        [
            charts.group_chart(_table, "optimisation", smoothing=0.6, max_points=400),
            charts.early_warning_charts(_table, max_points=400),
        ]
    )
    return


@app.cell(hide_code=True)
def _(mo, session, view):
    _png = session.mask_overlay() if not view.idle else None
    mo.stop(_png is None)
    mo.vstack([mo.md("Current batch: context (visible) and target blocks"), mo.image(_png, width=512)])
    return


if __name__ == "__main__":
    app.run()
