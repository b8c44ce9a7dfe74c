"""Button clicks that act exactly once, however often the notebook cell that reads them runs.

A marimo `run_button` reads True from its click until the cells that use it have run, so a cell that handles it
and also depends on other widgets (the run lists, rebuilt when a run starts) runs again while it still reads True
and acts twice: two trainers from one click. The workbench's buttons count their clicks instead
(`mo.ui.button(value=0, on_click=lambda n: n + 1)`), and a `ClickLedger` created once per kernel remembers the
counts it has acted on: a re-run with the same counts is no click.
"""

from __future__ import annotations

from typing import Mapping


class ClickLedger:
    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def new(self, counts: Mapping[str, int]) -> list[str]:
        """The buttons clicked since the last call, in the order given; every count is then remembered (also a
        lower one: a button built again starts from 0)."""
        fresh = [name for name, count in counts.items() if int(count or 0) > self._seen.get(name, 0)]
        self._seen.update({name: int(count or 0) for name, count in counts.items()})
        return fresh
