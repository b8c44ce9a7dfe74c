"""One click, one action (issue 46): the train notebook's button cell, driven as marimo runs it, acts once per click
however often it re-runs (it re-runs when the run lists it reads are rebuilt after a launch)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from jepa_core.workbench.clicks import ClickLedger
from test_notebooks import NOTEBOOKS

import importlib.util


def handle_clicks_cell():
    spec = importlib.util.spec_from_file_location("notebook_train_clicks", NOTEBOOKS / "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.handle_clicks


class CountingSession:
    def __init__(self) -> None:
        self.actions: list[str] = []

    def __getattr__(self, name: str):
        if name in ("start", "step", "stop", "launch_detached", "reattach", "resume"):
            return lambda *args: self.actions.append(name)
        raise AttributeError(name)


def widgets(**counts: int) -> dict:
    names = ("start", "step", "stop", "detach", "attach", "resume")
    return {f"{n}_button": SimpleNamespace(value=counts.get(n, 0)) for n in names}


def test_one_click_on_launch_detached_launches_once_through_a_run_list_change():
    cell, session, clicks = handle_clicks_cell(), CountingSession(), ClickLedger()

    def run(choice: str | None = None, **counts: int) -> None:
        cell.run(Path=Path, clicks=clicks, session=session, plan=object(), step_count=SimpleNamespace(value=5),
                 attach_choice=SimpleNamespace(value=choice), resume_choice=SimpleNamespace(value=None),
                 **widgets(**counts))

    run()  # the page opens: no click yet
    assert session.actions == []
    run(detach=1)  # one click on Launch detached
    assert session.actions == ["launch_detached"]
    run("runs/new", detach=1)  # the launch rebuilt the running-runs list: the cell runs again, same counts
    run("runs/new", detach=1)
    assert session.actions == ["launch_detached"]
    run("runs/new", detach=1, start=1)  # a later click on another button acts once, and only that one
    run("runs/new", detach=1, start=1)
    assert session.actions == ["launch_detached", "start"]
    run("runs/new", detach=2, start=1)  # a second click on the same button is a second action
    assert session.actions == ["launch_detached", "start", "launch_detached"]


def test_a_button_built_again_counts_from_zero():
    clicks = ClickLedger()
    assert clicks.new({"attach": 2}) == ["attach"]
    assert clicks.new({"attach": 0}) == []  # the list cell rebuilt the button
    assert clicks.new({"attach": 1}) == ["attach"]
