"""Learning-rate and weight-decay schedules as pure functions of the step (resume is exact without replay)."""

from __future__ import annotations

import math
from dataclasses import dataclass

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

    @classmethod
    def of(cls, optim) -> LrSchedule:
        """From an OptimConfig (or anything with its lr, start_lr, final_lr, warmup_steps and steps)."""
        return cls(optim.lr, optim.start_lr, optim.final_lr, optim.warmup_steps, optim.steps)

    def at(self, step: int) -> float:
        return warmup_cosine(step, self.steps, self.warmup_steps, self.lr, self.final_lr, self.start_lr)

    def summed(self, step: float) -> float:
        """The lr summed over the run up to `step`: the area under the schedule, taken as continuous (so the ratio of
        two sums is the same at any stretch of the same schedule; 0 at step 0). Past the end it holds final_lr."""
        step = max(float(step), 0.0)
        warm = min(step, float(self.warmup_steps))
        area = self.start_lr * warm + (self.lr - self.start_lr) * warm * warm / (2 * self.warmup_steps) \
            if self.warmup_steps > 0 else 0.0
        decay = float(self.steps - self.warmup_steps)
        into = min(step, float(self.steps)) - self.warmup_steps
        if into > 0 and decay > 0:
            area += self.final_lr * into + (self.lr - self.final_lr) * 0.5 * (
                into + decay / math.pi * math.sin(math.pi * into / decay))
        return area + self.final_lr * max(step - self.steps, 0.0)
