"""What every diagnostic of design §6 shares: its two forms, the one read-back, and the numerics under them.

The diagnostics themselves live by subject: `representation` (prediction agreement, spread, effective rank,
covariance), `masks_and_ema` (mask sizes and overlap, the EMA target), `weights_health` (gradients, noise scale,
stable rank, drift, update size) and `system_stats` (memory, CPU). Each metric comes in two forms:
- ``*_tensors(...)`` / ``*_tensor(...)`` returns 0-d tensors and avoids host syncs (the one exception: mask
  index validation), so the instrumentation hook can gather every metric due at a step and read them all back
  with one ``.tolist()`` (`to_floats`);
- the plain function returns Python floats (``dict[str, float]`` or ``float``) for tests, notebooks and scripts.
All math runs under ``torch.no_grad()`` in float32 (moments) or float64 (Gram matrices, parameter distances).
These run at cadence, never on the hot path.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

__all__ = ["to_floats", "wide", "feature_rows", "eigvalsh_or_nan"]


def to_floats(metrics: Mapping[str, Tensor | float | int]) -> dict[str, float]:
    """Tensors to Python floats with one host sync per device (one stack, one ``.tolist()``), order kept."""
    out = {k: float(v) for k, v in metrics.items() if not isinstance(v, Tensor)}
    by_device: dict[torch.device, dict[str, Tensor]] = {}
    for k, v in metrics.items():
        if isinstance(v, Tensor):
            by_device.setdefault(v.device, {})[k] = v
    for group in by_device.values():
        values = torch.stack([wide(t.detach().reshape(())) for t in group.values()]).tolist()
        out.update(zip(group.keys(), values))
    return {k: out[k] for k in metrics}


def wide(x: Tensor) -> Tensor:
    """float64 for accumulations; MPS has no float64, so float32 there."""
    return x.float() if x.device.type == "mps" else x.double()


def feature_rows(x: Tensor, name: str) -> Tensor:
    """[..., D] -> [N, D] float32; rejects tensors without a feature axis."""
    if x.dim() < 2:
        raise ValueError(f"{name}: expected features shaped [N, D] (or [..., D]), got shape {tuple(x.shape)}")
    x = x.detach().reshape(-1, x.shape[-1])
    return x if x.dtype in (torch.float32, torch.float64) else x.float()  # bf16/fp16 widened, float64 kept


def eigvalsh_or_nan(gram: Tensor) -> Tensor:
    """Eigenvalues of a symmetric Gram matrix that never raise: all NaN when the matrix is not finite or LAPACK
    cannot diagonalise it (a diverging run's weights do both). A diagnostic reads NaN; training goes on.

    The matrix is divided by its trace first (eigenvalues scale with it, and are scaled back), which keeps huge
    but finite weights from overflowing inside the solver."""
    finite = torch.isfinite(gram).all()
    scale = gram.diagonal().sum().abs().clamp_min(1e-300)
    safe = torch.where(finite, gram / scale, torch.zeros_like(gram))
    try:
        eig = torch.linalg.eigvalsh(safe) * scale
    except torch.linalg.LinAlgError:
        return torch.full(gram.shape[:1], float("nan"), dtype=gram.dtype, device=gram.device)
    return torch.where(finite, eig, torch.full_like(eig, float("nan")))
