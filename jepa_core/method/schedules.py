"""Learning-rate and weight-decay schedules as pure functions of the step (resume is exact without replay)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["LrSchedule", "warmup_cosine", "cosine_schedule"]


def _check_steps(step: int, total_steps: int) -> None:
    if total_steps < 1:
        raise ValueError(f"schedule: total_steps must be at least 1, got {total_steps}")
    if step < 0:
        raise ValueError(f"schedule: step must be non-negative, got {step}")


def warmup_cosine(
    step: int, total_steps: int, warmup_steps: int, base: float, final: float, start: float = 0.0
) -> float:
    """Linear warmup ``start -> base`` over ``warmup_steps``, then cosine ``base -> final`` until ``total_steps``.

    Constant ``final`` after ``total_steps``. The value at ``step == warmup_steps`` is exactly ``base`` (unless
    ``warmup_steps == total_steps``, where the schedule has ended and gives ``final``).
    """
    _check_steps(step, total_steps)
    if not 0 <= warmup_steps <= total_steps:
        raise ValueError(f"optim.warmup_steps must be in [0, total_steps={total_steps}], got {warmup_steps}")
    if step < warmup_steps:
        return start + (base - start) * step / warmup_steps
    decay_steps = total_steps - warmup_steps
    if decay_steps == 0:
        return final
    t = min((step - warmup_steps) / decay_steps, 1.0)
    return final + (base - final) * 0.5 * (1.0 + math.cos(math.pi * t))


def cosine_schedule(step: int, total_steps: int, start: float, end: float) -> float:
    """Half-cosine from ``start`` (step 0) to ``end`` (``total_steps`` and after); used for weight decay."""
    _check_steps(step, total_steps)
    t = min(step / total_steps, 1.0)
    return end + (start - end) * 0.5 * (1.0 + math.cos(math.pi * t))


@dataclass(frozen=True)
class LrSchedule:
    """A run's learning-rate schedule (its config's [optim] section, faults left out), for what must know how far the
    schedule alone moves the weights: under a linear warm-up the distance the online encoder travels grows like the
    lr summed so far, about the step squared, so a reading several times the previous one is the schedule's doing."""

    lr: float
    start_lr: float
    final_lr: float
    warmup_steps: int
    steps: int
    _sums: list[float] = field(default_factory=list, init=False, repr=False, compare=False)

    @classmethod
    def of(cls, optim) -> LrSchedule:
        """From an OptimConfig (or anything with its lr, start_lr, final_lr, warmup_steps and steps)."""
        return cls(optim.lr, optim.start_lr, optim.final_lr, optim.warmup_steps, optim.steps)

    def at(self, step: int) -> float:
        return warmup_cosine(step, self.steps, self.warmup_steps, self.lr, self.final_lr, self.start_lr)

    def summed(self, step: int) -> float:
        """The lr summed over the updates a row at `step` follows (updates 0..step-1; 0 at step 0)."""
        step = max(step, 0)
        if step > self.steps:  # past the end the schedule holds final_lr
            return self.summed(self.steps) + self.final_lr * (step - self.steps)
        # Summed as far as asked, once (a frozen dataclass's list can still be filled): a run's rows never ask
        # past the step it reached, however long its schedule.
        if not self._sums:
            self._sums.append(0.0)
        while len(self._sums) <= step:
            self._sums.append(self._sums[-1] + self.at(len(self._sums) - 1))
        return self._sums[step]
