"""Learning-rate and weight-decay schedules as pure functions of the step (resume is exact without replay)."""

from __future__ import annotations

import math

__all__ = ["warmup_cosine", "cosine_schedule"]


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
