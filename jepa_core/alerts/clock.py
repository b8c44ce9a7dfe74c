"""The run's own units of time, in which the rules count (design §7).

A rule's verdict must not depend on how many steps a run takes to do the same thing: a run of 100,000 steps with a
warm-up of 5,000, read every 200, goes through what a run of 1,000 steps read every 2 goes through, 100 times slower.
So no rule counts steps. Each time constant of `RulesConfig` names its unit in its name, and `RunClock` turns it into
steps for one run:

- `_readings`: basic readings (`diagnostics.basic_every_steps` apart): the trends' memories and every window a fall
  or a high is measured over;
- `_warmups`: the run's lr warm-up (`optim.warmup_steps`), read from the lr schedule the rule is given (only
  `online_collapse`'s wait: without a schedule it does not wait);
- `_fraction`: of the whole schedule (`optim.steps`).

Multiply a run's steps, its cadences and its schedule by ten and every rule says the same thing at ten times the
steps (research/stretched_replay.py checks it on every case of the detection library).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RunClock", "REFERENCE_CLOCK"]


@dataclass(frozen=True)
class RunClock:
    """Steps per unit of time of one run. Without the run's config (a bare stream) the rules use `REFERENCE_CLOCK`,
    a run of the detection library's typical shape."""

    reading_steps: float = 10.0  # steps between two basic readings
    run_steps: float = 600.0  # the schedule's length

    def __post_init__(self) -> None:
        for name in ("reading_steps", "run_steps"):
            if not getattr(self, name) > 0:
                raise ValueError(f"RunClock.{name} must be positive, got {getattr(self, name)!r}")

    @classmethod
    def of(cls, cfg: Any) -> RunClock:
        """The clock of a run config (a `Config`: its [diagnostics] and [optim] sections)."""
        reading = float(cfg.diagnostics.basic_every_steps)
        return cls(reading, max(float(cfg.optim.steps), reading))

    def readings(self, count: float) -> float:
        return count * self.reading_steps

    def of_run(self, fraction: float) -> float:
        return fraction * self.run_steps

    def stretched(self, factor: float) -> RunClock:
        """The clock of the same run with every step multiplied by `factor`."""
        return RunClock(self.reading_steps * factor, self.run_steps * factor)


REFERENCE_CLOCK = RunClock()
