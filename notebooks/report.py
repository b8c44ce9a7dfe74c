import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="JEPA run report")


@app.cell
def _():
    import os
    import sys

    import marimo as mo

    from jepa_core import charts, runs
    from jepa_core.stream import read_metrics

    return charts, mo, os, read_metrics, runs, sys


@app.cell
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


@app.cell
def _(read_metrics, run_path, runs):
    summary = runs.load_run_summary(run_path)
    table = read_metrics(run_path / "metrics.jsonl")
    return summary, table


@app.cell
def _(mo, runs, summary):
    mo.md(runs.summary_markdown(summary))
    return


@app.cell
def _(charts, mo, table):
    _alerts = charts.alert_table(table)
    _note = (
        mo.callout(mo.md(f"**{len(_alerts)} alert(s)** fired in this run."), kind="danger")
        if len(_alerts)
        else mo.callout(mo.md("No alerts fired."), kind="success")
    )
    _note
    return


@app.cell
def _(charts, mo, table):
    mo.vstack(
        [
            mo.md("## Early-warning signals\nDashed vertical rules mark alerts (hover for the message)."),
            charts.early_warning_charts(table, smoothing=0.0),
        ]
    )
    return


@app.cell
def _(charts, mo, table):
    _alerts = charts.alert_table(table)
    mo.vstack(
        [
            mo.md("## Alerts"),
            mo.ui.table(_alerts, selection=None, page_size=20) if len(_alerts) else mo.md("None."),
        ]
    )
    return


@app.cell
def _(charts, mo, table):
    mo.vstack([mo.md("## Evaluation"), charts.eval_chart(table)])
    return


@app.cell
def _(charts, mo, table):
    mo.vstack([mo.md("## Throughput"), charts.throughput_chart(table)])
    return


if __name__ == "__main__":
    app.run()
