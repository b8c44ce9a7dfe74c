"""EMA of the online (context) encoder into the target encoder, and its momentum schedule."""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["ema_momentum", "ema_update_"]

_SCHEDULES = ("linear", "cosine")


def ema_momentum(
    step: int, total_steps: int, start: float = 0.996, end: float = 1.0, schedule: str = "linear"
) -> float:
    """EMA momentum at ``step``: a pure function of the step, so a resumed run needs no replay.

    ``t = clamp(step / total_steps, 0, 1)``; "linear" gives ``start + (end - start) * t``, "cosine" gives
    ``end - (end - start) * (cos(pi * t) + 1) / 2`` (slow start, slow finish).
    """
    if total_steps < 1:
        raise ValueError(f"ema_momentum: total_steps must be at least 1, got {total_steps}")
    for name, value in (("ema.start", start), ("ema.end", end)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value}")
    t = min(max(step / total_steps, 0.0), 1.0)
    if schedule == "linear":
        return start + (end - start) * t
    if schedule == "cosine":
        return end - (end - start) * (math.cos(math.pi * t) + 1.0) / 2.0
    raise ValueError(f"ema.schedule must be one of {_SCHEDULES}, got {schedule!r}")


@torch.no_grad()
def ema_update_(target: nn.Module, online: nn.Module, momentum: float) -> None:
    """In place ``target = momentum * target + (1 - momentum) * online`` for every parameter; buffers copied.

    Parameters are paired in registration order, which is identical for a target made by ``deepcopy(online)``.
    """
    if not 0.0 <= momentum <= 1.0:
        raise ValueError(f"ema_update_: momentum must be in [0, 1], got {momentum}")
    target_params = list(target.parameters())
    online_params = list(online.parameters())
    _check_pairing("parameter", target_params, online_params)
    if target_params:
        # lerp_(end, w) = self + w * (end - self): w = 1 - m; exact copy at m = 0 and exact no-op at m = 1.
        online_data = [p.detach().to(t.dtype) for t, p in zip(target_params, online_params)]
        torch._foreach_lerp_([t.data for t in target_params], online_data, 1.0 - momentum)
    target_buffers = list(target.buffers())
    online_buffers = list(online.buffers())
    _check_pairing("buffer", target_buffers, online_buffers)
    for t, o in zip(target_buffers, online_buffers):
        t.copy_(o)


def _check_pairing(kind: str, target: list[torch.Tensor], online: list[torch.Tensor]) -> None:
    if len(target) != len(online):
        raise ValueError(f"ema_update_: target has {len(target)} {kind}s, online has {len(online)}")
    for i, (t, o) in enumerate(zip(target, online)):
        if t.shape != o.shape:
            raise ValueError(f"ema_update_: {kind} #{i} shape differs: target {tuple(t.shape)} vs online {tuple(o.shape)}")
