"""Optimisation and weights health (design §6, the `weights_health` group): the gradient's direction from step to
step, the gradient noise scale, the stable rank of the weight matrices, their drift from initialisation and the
relative size of one optimiser step.

Two forms per metric, as `jepa_core.metrics.diagnostics` describes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import torch
from torch import Tensor, nn

from jepa_core.metrics.diagnostics import eigvalsh_or_nan, to_floats, wide

__all__ = [
    "flat_grad", "grad_cosine_tensor", "GradientNoiseScale", "stable_rank_tensor", "stable_rank_min",
    "stable_rank_min_tensors", "weight_drift_max", "weight_drift_max_tensors", "update_ratio", "update_ratio_tensors",
]


def flat_grad(params: Iterable[Tensor]) -> Tensor | None:
    """All present ``.grad`` tensors flattened into one float32 vector (a copy), or None if there are none."""
    grads = [p.grad.detach().reshape(-1).float() for p in params if p.grad is not None]
    return torch.cat(grads) if grads else None


@torch.no_grad()
def grad_cosine_tensor(g_prev: Tensor, g_now: Tensor) -> Tensor:
    """Cosine between two flattened gradients (consecutive steps: positive = consistent, negative = oscillating)."""
    a, b = wide(g_prev.detach().reshape(-1)), wide(g_now.detach().reshape(-1))
    if a.shape != b.shape:
        raise ValueError(f"grad_cosine: gradient sizes differ: {a.numel()} vs {b.numel()}")
    return (a @ b) / (a.norm() * b.norm()).clamp_min(1e-30)


class GradientNoiseScale:
    """McCandlish et al. (2018) simple noise scale B_simple = tr(Σ) / |G|^2, from two batch sizes.

    With E|g_b|^2 = |G|^2 + tr(Σ)/b, a small batch b_s and a big batch b_b give unbiased estimates
    |G|^2 ≈ (b_b |g_b|^2 − b_s |g_s|^2) / (b_b − b_s) and tr(Σ) ≈ (|g_s|^2 − |g_b|^2) / (1/b_s − 1/b_b).
    Each estimate alone is very noisy (and can be negative), so numerator and denominator are smoothed by
    separate debiased EMAs and only their ratio is reported (the ratio of EMAs, not the EMA of ratios).
    Under DDP pass the per-rank gradient norms as the small batches and the all-reduced norm as the big one.
    """

    def __init__(self, decay: float = 0.95) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"GradientNoiseScale: decay must be in [0, 1), got {decay}")
        self.decay = decay
        self.trace_ema = 0.0
        self.grad_sq_ema = 0.0
        self.updates = 0

    def update(self, small_sq_norms: list[float], b_small: int, big_sq_norm: float, b_big: int) -> float | None:
        """Feed one step's squared norms; return the current B_simple, or None while it is not yet positive."""
        if not small_sq_norms:
            raise ValueError("GradientNoiseScale.update: small_sq_norms is empty")
        if not 0 < b_small < b_big:
            raise ValueError(f"GradientNoiseScale.update: need 0 < b_small < b_big, got {b_small} and {b_big}")
        small = sum(float(v) for v in small_sq_norms) / len(small_sq_norms)
        big = float(big_sq_norm)
        if not (math.isfinite(small) and math.isfinite(big)):
            return self.value  # a non-finite step would poison the EMAs forever; the non-finite rule reports it
        grad_sq = (b_big * big - b_small * small) / (b_big - b_small)
        trace = (small - big) / (1.0 / b_small - 1.0 / b_big)
        self.grad_sq_ema = self.decay * self.grad_sq_ema + (1.0 - self.decay) * grad_sq
        self.trace_ema = self.decay * self.trace_ema + (1.0 - self.decay) * trace
        self.updates += 1
        return self.value

    @property
    def value(self) -> float | None:
        if self.updates == 0:
            return None
        # The debias factor (1 - decay^n) is shared by both EMAs and cancels in the ratio.
        if self.grad_sq_ema <= 0.0 or self.trace_ema <= 0.0:
            return None
        return self.trace_ema / self.grad_sq_ema

    def state_dict(self) -> dict[str, float]:
        return {"decay": self.decay, "trace_ema": self.trace_ema, "grad_sq_ema": self.grad_sq_ema,
                "updates": self.updates}

    def load_state_dict(self, state: Mapping[str, float]) -> None:
        self.decay = float(state["decay"])
        self.trace_ema = float(state["trace_ema"])
        self.grad_sq_ema = float(state["grad_sq_ema"])
        self.updates = int(state["updates"])


@torch.no_grad()
def stable_rank_tensor(w: Tensor) -> Tensor:
    """||W||_F^2 / ||W||_2^2: 1 for a rank-1 matrix, n for an n x n orthogonal one."""
    if w.dim() != 2:
        raise ValueError(f"stable_rank: expected a 2-D matrix, got shape {tuple(w.shape)}")
    x = wide(w.detach())
    # ||W||_F^2 = trace(Gram) and ||W||_2^2 = largest Gram eigenvalue: the smaller Gram is cheap and exact.
    gram = x.T @ x if x.shape[0] >= x.shape[1] else x @ x.T
    top = eigvalsh_or_nan(gram)[-1]
    return gram.diagonal().sum() / top.clamp_min(1e-300)


def _matrices(model: nn.Module) -> list[tuple[str, Tensor]]:
    return [(n, p) for n, p in model.named_parameters() if p.dim() == 2 and p.requires_grad]


def stable_rank_min_tensors(model: nn.Module) -> dict[str, Tensor]:
    mats = _matrices(model)
    if not mats:
        raise ValueError("stable_rank_min: the model has no trainable 2-D weight matrices")
    return {"health/stable_rank_min": torch.stack([stable_rank_tensor(p) for _, p in mats]).min()}


def stable_rank_min(model: nn.Module) -> dict[str, float]:
    """Smallest stable rank over the model's trainable 2-D weight matrices."""
    return to_floats(stable_rank_min_tensors(model))


@torch.no_grad()
def weight_drift_max_tensors(model: nn.Module, init_state: Mapping[str, Tensor]) -> dict[str, Tensor]:
    ratios = []
    for name, p in model.named_parameters():
        if p.dim() < 2:
            continue
        if name not in init_state:
            raise ValueError(f"weight_drift_max: init_state has no entry for parameter {name!r}")
        w0 = wide(init_state[name].to(p.device))
        if w0.shape != p.shape:
            raise ValueError(f"weight_drift_max: {name!r} init shape {tuple(w0.shape)} vs now {tuple(p.shape)}")
        w0_norm = w0.norm()
        ratios.append(torch.where(w0_norm > 0, (wide(p) - w0).norm() / w0_norm.clamp_min(1e-30), 0.0))
    if not ratios:
        raise ValueError("weight_drift_max: the model has no weight tensors")
    return {"health/weight_drift_max": torch.stack(ratios).max()}


def weight_drift_max(model: nn.Module, init_state: Mapping[str, Tensor]) -> dict[str, float]:
    """max ||w − w0|| / ||w0|| over weight tensors (2-D and up) that ``init_state`` holds with a non-zero norm.

    Biases and norm gains are left out on purpose: they start at 0 or 1, so their relative drift is either
    undefined or says nothing about the learned weights. A weight tensor missing from init_state is an error.
    """
    return to_floats(weight_drift_max_tensors(model, init_state))


@torch.no_grad()
def update_ratio_tensors(params_before: Iterable[Tensor], params_after: Iterable[Tensor]) -> dict[str, Tensor]:
    before, after = list(params_before), list(params_after)
    if len(before) != len(after) or not before:
        raise ValueError(f"update_ratio: need equally many parameters, got {len(before)} and {len(after)}")
    delta_sq = torch.stack([(wide(a) - wide(b)).pow(2).sum() for b, a in zip(before, after)]).sum()
    before_sq = torch.stack([wide(b).pow(2).sum() for b in before]).sum()
    return {"health/update_ratio": delta_sq.sqrt() / before_sq.sqrt().clamp_min(1e-30)}


def update_ratio(params_before: Iterable[Tensor], params_after: Iterable[Tensor]) -> dict[str, float]:
    """Global ||Δw|| / ||w_before|| over all paired parameters (one optimiser step's relative size)."""
    return to_floats(update_ratio_tensors(params_before, params_after))
