import marimo

__generated_with = "0.25.2"
app = marimo.App(width="full", app_title="JEPA monitor", css_file="workbench.css")


@app.cell(hide_code=True)
def _():
    import os
    import sys
    from pathlib import Path

    import marimo as mo

    from jepa_core.workbench import charts, runs
    from jepa_core.workbench.branches import branch_view
    from jepa_core.workbench.live import LiveRun
    from jepa_core.workbench.markup import md_text, problems_markdown

    return LiveRun, Path, branch_view, charts, md_text, mo, os, problems_markdown, runs, sys


@app.cell(hide_code=True)
def _(mo):
    # A code cell, not a markdown one: marimo's editor opens a markdown-only cell marked "outdated", which
    # lights its "run stale cells" button on a page that is ready.
    _title = mo.md("""
    # JEPA monitor
    Pick one or more runs from `runs/` and `data/runs/`. A running run is followed live
    (only new bytes are read); the first selected run fills the per-group panels.
    """)
    _title
    return


@app.cell(hide_code=True)
def _(mo, os, runs, sys):
    # `-- --run PATH` adds (and selects) a run outside the usual folders; $JEPA_RUN stands in under tests.
    cli_run = None if mo.app_meta().mode == "test" else runs.run_argument(sys.argv[1:])
    cli_run = cli_run or os.environ.get("JEPA_RUN")
    return (cli_run,)


@app.cell(hide_code=True)
def _(mo):
    # What following keeps between re-runs: LiveRun objects by path (so following resumes where it stopped), and
    # a version bumped by the poll cell only when new rows arrived (charts are not rebuilt on idle ticks).
    live_cache = {}
    get_version, set_version = mo.state(0)
    return get_version, live_cache, set_version


@app.cell(hide_code=True)
def _(cli_run, rescan, runs):
    rescan.value  # re-run discovery when the button is pressed
    found = runs.discover_runs(runs.DEFAULT_ROOTS + ((cli_run,) if cli_run else ()))
    return (found,)


@app.cell(hide_code=True)
def _(Path, cli_run, found, mo):
    # Labels are the selectable keys: keep them stable (no status or step count in them).
    run_options = {f"{r.name}  ({r.path.parent})": str(r.path) for r in found}
    _default = [k for k, v in run_options.items() if cli_run and Path(v).resolve() == Path(cli_run).resolve()]
    if not _default and run_options:
        _default = [next(iter(run_options))]
    picker = mo.ui.multiselect(options=run_options, value=_default, label="runs")
    run_table = mo.ui.table(
        [
            {"run": r.name, "status": r.status, "last step": r.steps, "folder": str(r.path.parent)}
            for r in found
        ],
        selection=None,
        label="discovered runs",
    )
    mo.stop(
        not run_options,
        mo.callout(mo.md("No runs found under `runs/` or `data/runs/`. Train one, or pass `-- --run PATH`."), kind="warn"),
    )
    return picker, run_table


@app.cell(hide_code=True)
def _(mo):
    rescan = mo.ui.button(label="Rescan runs", value=0, on_click=lambda n: n + 1)
    smoothing = mo.ui.slider(0.0, 0.99, step=0.01, value=0.6, label="smoothing (debiased EMA)", show_value=True)
    max_points = mo.ui.dropdown(options=["250", "500", "1000", "2000"], value="1000", label="points per series")
    follow = mo.ui.switch(value=True, label="follow live runs")
    ticker = mo.ui.refresh(options=["1s", "2s", "5s", "10s"], default_interval="2s", label="poll")
    return follow, max_points, rescan, smoothing, ticker


@app.cell(hide_code=True)
def _(follow, max_points, mo, picker, rescan, run_table, smoothing, ticker):
    mo.vstack([picker, mo.hstack([smoothing, max_points, follow, ticker, rescan], justify="start"), run_table])
    return


@app.cell(hide_code=True)
def _(LiveRun, live_cache, picker):
    selected = []
    for _path in picker.value:
        if _path not in live_cache:
            live_cache[_path] = LiveRun(_path)
        selected.append(live_cache[_path])
    return (selected,)


@app.cell(hide_code=True)
def _(follow, selected, set_version, ticker):
    ticker.value  # one poll per tick
    if follow.value and any([_run.poll() for _run in selected]):
        set_version(lambda v: v + 1)
    return


@app.cell(hide_code=True)
def _(get_version, selected):
    get_version()
    tables = {_run.name: _run.table for _run in selected}
    primary = selected[0] if selected else None
    return primary, tables


@app.cell(hide_code=True)
def _(charts, md_text, mo, primary, problems_markdown, runs):
    mo.stop(primary is None, mo.md("Select at least one run."))
    # Status and last step from the run itself (meta.json; the stream while it is live), shown verbatim.
    _info = runs.run_info(primary.path)
    _alerts = charts.alert_table(primary.table)
    _steps = "?" if _info.steps is None else _info.steps
    _following = "following live" if primary.follower is not None else "read once (ended)"
    _problems = runs.load_run_summary(primary.path, with_verdict=False).problems + primary.problems
    _header = mo.md(
        f"## {md_text(primary.name)}\n"
        f"status **{md_text(_info.status)}**, last step **{_steps}**, {len(primary.table.scalars)} rows, "
        f"**{len(_alerts)} alert(s)**, {_following}"
    )
    mo.vstack([_header, mo.callout(mo.md(problems_markdown(_problems)), kind="warn")] if _problems else [_header])
    return


@app.cell(hide_code=True)
def _(charts, max_points, mo, primary, smoothing):
    mo.stop(primary is None)
    mo.ui.tabs(
        {
            _group: charts.group_chart(primary.table, _group, smoothing.value, int(max_points.value))
            for _group in charts.METRIC_GROUPS
        }
    )
    return


@app.cell(hide_code=True)
def _(charts, max_points, mo, primary, smoothing):
    mo.stop(primary is None)
    mo.vstack(
        [
            mo.md("## Early-warning signals (dashed rules: alerts)"),
            charts.early_warning_charts(primary.table, smoothing=smoothing.value, max_points=int(max_points.value)),
        ]
    )
    return


@app.cell(hide_code=True)
def _(charts, mo, primary):
    mo.stop(primary is None)
    _alerts = charts.alert_table(primary.table)
    mo.vstack(
        [
            mo.md("## Alerts"),
            mo.ui.table(_alerts, selection=None, page_size=10) if len(_alerts) else mo.md("No alerts."),
        ]
    )
    return


@app.cell(hide_code=True)
def _(charts, mo, primary):
    mo.stop(primary is None)
    mo.vstack([mo.md("## Evaluation (dashed: random-init baseline)"), charts.eval_chart(primary.table)])
    return


@app.cell(hide_code=True)
def _(branch_view, max_points, md_text, mo, primary, smoothing):
    mo.stop(primary is None)
    # A branch made by `jepa rewind` (or the workbench's "Rewind here"), drawn over its parent from the branch point.
    _view = branch_view(primary.path, primary.name, primary.table, smoothing.value, int(max_points.value))
    mo.stop(_view is None)
    mo.vstack([mo.md(f"## Branch of {md_text(_view[0])} at step {_view[1]}"), _view[2]])
    return


@app.cell(hide_code=True)
def _(charts, mo, selected):
    _names = sorted(
        {m for _run in selected for m in charts.present_metrics(_run.table.scalars, _run.table.scalars.columns)}
        - {"step", "attempt"}
    )
    overlay_metric = mo.ui.dropdown(
        options=_names or ["loss"], value="loss" if "loss" in _names or not _names else _names[0], label="metric"
    )
    return (overlay_metric,)


@app.cell(hide_code=True)
def _(charts, max_points, mo, overlay_metric, smoothing, tables):
    mo.vstack(
        [
            mo.md("## Runs overlaid"),
            overlay_metric,
            charts.overlay_chart(tables, overlay_metric.value, smoothing.value, int(max_points.value)),
        ]
    )
    return


if __name__ == "__main__":
    app.run()
