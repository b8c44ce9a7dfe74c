import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="JEPA run report", css_file="workbench.css")


@app.cell(hide_code=True)
def _():
    import os
    import sys

    import marimo as mo

    from jepa_core.workbench import charts, runs
    from jepa_core.workbench.branches import branch_view
    from jepa_core.workbench.markup import problems_markdown, summary_markdown

    return branch_view, charts, mo, os, problems_markdown, runs, summary_markdown, sys


@app.cell(hide_code=True)
def _(mo, os, runs, sys):
    # `-- --run PATH` on the command line (sys.argv); $JEPA_RUN when there is none (tests).
    _cli = None if mo.app_meta().mode == "test" else runs.run_argument(sys.argv[1:])
    run_path = runs.resolve_run(_cli, os.environ.get("JEPA_RUN"))
    mo.stop(
        run_path is None,
        mo.callout(
            mo.md("No run found. Pass one with `-- --run runs/NAME`, or train one first."),
            kind="warn",
        ),
    )
    return (run_path,)


@app.cell(hide_code=True)
def _(run_path, runs):
    # A damaged meta.json, config.toml or metrics line is left out and named below, never fatal.
    summary = runs.load_run_summary(run_path)
    table, _stream_problems = runs.load_run_table(run_path)
    problems = summary.problems + _stream_problems
    return problems, summary, table


@app.cell(hide_code=True)
def _(mo, problems, problems_markdown, summary, summary_markdown):
    _header = mo.md(summary_markdown(summary))
    mo.vstack([_header, mo.callout(mo.md(problems_markdown(problems)), kind="warn")] if problems else [_header])
    return


@app.cell(hide_code=True)
def _(charts, mo, table):
    _alerts = charts.alert_table(table)
    _note = (
        mo.callout(mo.md(f"**{len(_alerts)} alert(s)** fired in this run."), kind="danger")
        if len(_alerts)
        else mo.callout(mo.md("No alerts fired."), kind="success")
    )
    _note
    return


@app.cell(hide_code=True)
def _(charts, mo, table):
    mo.vstack(
        [
            mo.md("## Early-warning signals\nDashed vertical rules mark alerts (hover for the message)."),
            charts.early_warning_charts(table, smoothing=0.0),
        ]
    )
    return


@app.cell(hide_code=True)
def _(charts, mo, table):
    _alerts = charts.alert_table(table)
    mo.vstack(
        [
            mo.md("## Alerts"),
            mo.ui.table(_alerts, selection=None, page_size=20) if len(_alerts) else mo.md("None."),
        ]
    )
    return


@app.cell(hide_code=True)
def _(charts, mo, table):
    mo.vstack([mo.md("## Evaluation"), charts.eval_chart(table)])
    return


@app.cell(hide_code=True)
def _(branch_view, mo, run_path, summary, table):
    # A branch made by `jepa rewind`, drawn over its parent from the branch point.
    _view = branch_view(run_path, summary.name, table)
    mo.stop(_view is None)
    _words = f"Before step {_view[1]} the branch is its parent's history; after it, what the change did."
    mo.vstack([mo.md(f"## Branch and parent\n{_words}"), _view[2]])
    return


@app.cell(hide_code=True)
def _(charts, mo, table):
    mo.vstack([mo.md("## Throughput"), charts.throughput_chart(table)])
    return


if __name__ == "__main__":
    app.run()
