"""Every diagnostic of SPEC §6 as a small pure function on detached tensors.

Each metric comes in two forms:
- ``*_tensors(...)`` / ``*_tensor(...)`` returns 0-d tensors and avoids host syncs (the one exception: mask
  index validation), so the instrumentation hook can gather every metric due at a step and read them all back
  with one ``.tolist()``;
- the plain function returns Python floats (``dict[str, float]`` or ``float``) for tests, notebooks and scripts.
All math runs under ``torch.no_grad()`` in float32 (moments) or float64 (Gram matrices, parameter distances).
These run at cadence, never on the hot path.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import psutil
import torch
from torch import Tensor, nn

__all__ = [
    "to_floats", "prediction_agreement_tensors", "representation_stats_tensors", "effective_rank", "effective_rank_tensor", "token_effective_rank",
    "subsample_rows", "cov_offdiag_abs_mean", "cov_offdiag_abs_mean_tensor", "mask_stats_tensors",
    "ema_distance_tensors", "target_grad_params", "flat_grad", "grad_cosine_tensor",
    "GradientNoiseScale", "stable_rank_tensor", "stable_rank_min", "stable_rank_min_tensors",
    "weight_drift_max", "weight_drift_max_tensors", "update_ratio", "update_ratio_tensors", "memory_stats",
    "SystemStats",
]

# Relative threshold for a "dead" dimension: its std below this fraction of the features' RMS magnitude.
# RMS (not the mean std) is the reference so that a fully collapsed representation still reads as dead.
DEFAULT_DEAD_EPS = 1e-2
# Singular values below this fraction of the largest are below what the Gram route can resolve in float64
# (it squares the condition number), so they are treated as exact zeros.
_GRAM_REL_CUTOFF = 1e-7
_GIB = float(1024**3)


def to_floats(metrics: Mapping[str, Tensor | float | int]) -> dict[str, float]:
    """Tensors to Python floats with one host sync per device (one stack, one ``.tolist()``), order kept."""
    out = {k: float(v) for k, v in metrics.items() if not isinstance(v, Tensor)}
    by_device: dict[torch.device, dict[str, Tensor]] = {}
    for k, v in metrics.items():
        if isinstance(v, Tensor):
            by_device.setdefault(v.device, {})[k] = v
    for group in by_device.values():
        values = torch.stack([_wide(t.detach().reshape(())) for t in group.values()]).tolist()
        out.update(zip(group.keys(), values))
    return {k: out[k] for k in metrics}


def _wide(x: Tensor) -> Tensor:
    """float64 for accumulations; MPS has no float64, so float32 there."""
    return x.float() if x.device.type == "mps" else x.double()


def _rows(x: Tensor, name: str) -> Tensor:
    """[..., D] -> [N, D] float32; rejects tensors without a feature axis."""
    if x.dim() < 2:
        raise ValueError(f"{name}: expected features shaped [N, D] (or [..., D]), got shape {tuple(x.shape)}")
    x = x.detach().reshape(-1, x.shape[-1])
    return x if x.dtype in (torch.float32, torch.float64) else x.float()  # bf16/fp16 widened, float64 kept


# ---------------------------------------------------------------------------------------------------------------
# Prediction and representation


@torch.no_grad()
def prediction_agreement_tensors(pred: Tensor, target: Tensor) -> dict[str, Tensor]:
    """MSE, MAE and mean per-token cosine between predictor output and targets (any shape [..., D])."""
    if pred.shape != target.shape:
        raise ValueError(f"prediction_agreement: pred {tuple(pred.shape)} and target {tuple(target.shape)} differ")
    p, t = _rows(pred, "pred"), _rows(target, "target")
    diff = p - t
    return {
        "pred_target/mse": diff.pow(2).mean(),
        "pred_target/mae": diff.abs().mean(),
        "pred_target/cosine": torch.nn.functional.cosine_similarity(p, t, dim=-1, eps=1e-8).mean(),
    }


@torch.no_grad()
def representation_stats_tensors(feats: Tensor, prefix: str, dead_eps: float = DEFAULT_DEAD_EPS) -> dict[str, Tensor]:
    """Norms and per-dimension spread of features [N, D] (std over samples, per dimension).

    ``std_l2n`` is the per-dimension std of the L2-normalised rows, averaged over dimensions: about 1/sqrt(D) for
    isotropic features, 0 when collapsed. A dimension is dead when its std is at most ``dead_eps`` times the RMS
    magnitude of the features (scale-free; all-equal rows count as fully dead).
    """
    x = _rows(feats, f"representation_stats[{prefix}]")
    norms = x.norm(dim=1)
    std = x.std(dim=0, correction=0)  # population std: defined for N = 1 and exactly 0 for identical rows
    std_l2n = torch.nn.functional.normalize(x, dim=1, eps=1e-12).std(dim=0, correction=0).mean()
    rms = x.pow(2).mean().sqrt()
    dead = (std <= dead_eps * rms).float().mean()
    return {
        f"{prefix}/norm_mean": norms.mean(),
        f"{prefix}/norm_std": norms.std(correction=0),
        f"{prefix}/std_mean": std.mean(),
        f"{prefix}/std_min": std.min(),
        f"{prefix}/std_l2n": std_l2n,
        f"{prefix}/dead_dim_fraction": dead,
    }


def _eigvalsh_or_nan(gram: Tensor) -> Tensor:
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


@torch.no_grad()
def _singular_values_via_gram(x: Tensor) -> Tensor:
    """Singular values of x [N, D] from the eigenvalues of the smaller Gram matrix (float64), no SVD of x."""
    x = _wide(x)
    gram = x.T @ x if x.shape[0] >= x.shape[1] else x @ x.T
    eig = _eigvalsh_or_nan(gram).clamp_min(0.0)
    eig = torch.where(eig < eig.max() * _GRAM_REL_CUTOFF**2, torch.zeros_like(eig), eig)
    return eig.sqrt()


@torch.no_grad()
def effective_rank_tensor(feats: Tensor) -> Tensor:
    x = _rows(feats, "effective_rank")
    # eigvalsh fails to converge on NaN/Inf: decompose a zeroed copy and report NaN, without a host sync.
    finite = torch.isfinite(x).all()
    s = _singular_values_via_gram(torch.where(finite, x, torch.zeros_like(x)))
    p = s / (s.sum() + 1e-12)
    entropy = -(p * torch.log(p.clamp_min(1e-300))).sum()  # 0 * log(tiny) = 0 for the zero singular values
    return torch.where(finite, entropy.exp(), torch.full_like(entropy, float("nan")))


def effective_rank(feats: Tensor) -> float:
    """RankMe (Garrido et al.): exp of the entropy of the normalised singular values of feats [N, D].

    Uncentred, as in RankMe. Between 1 (all rows parallel, or all zero) and min(N, D).
    """
    return float(effective_rank_tensor(feats).item())


def subsample_rows(x: Tensor, max_rows: int, generator: torch.Generator | None = None) -> Tensor:
    """At most ``max_rows`` rows of x [N, D], drawn without replacement (all rows, in order, when N is small)."""
    if max_rows < 1:
        raise ValueError(f"subsample_rows: max_rows must be positive, got {max_rows}")
    if x.shape[0] <= max_rows:
        return x
    idx = torch.randperm(x.shape[0], generator=generator)[:max_rows]  # on CPU: a CPU generator always works
    return x[idx.to(x.device)]


def token_effective_rank(tokens: Tensor, max_tokens: int = 4096, generator: torch.Generator | None = None) -> float:
    """RankMe over patch tokens [B, T, D] pooled into one [B*T, D] set, subsampled to ``max_tokens`` rows."""
    return float(effective_rank_tensor(subsample_rows(_rows(tokens, "token_effective_rank"), max_tokens, generator)))


@torch.no_grad()
def cov_offdiag_abs_mean_tensor(feats: Tensor) -> Tensor:
    x = _wide(_rows(feats, "cov_offdiag_abs_mean"))
    d = x.shape[1]
    if d < 2:
        return torch.zeros((), dtype=x.dtype, device=x.device)
    x = x - x.mean(dim=0, keepdim=True)
    cov = x.T @ x / max(x.shape[0] - 1, 1)
    # Dead dimensions (zero std) get correlation 0 instead of 0/0.
    std = cov.diagonal().clamp_min(0.0).sqrt()
    corr = cov / torch.outer(std, std).clamp_min(1e-24)
    offdiag_sum = corr.abs().sum() - corr.diagonal().abs().sum()
    return offdiag_sum / (d * (d - 1))


def cov_offdiag_abs_mean(feats: Tensor) -> float:
    """Mean |off-diagonal| of the CORRELATION matrix of feats [N, D] (scale-free; 0 decorrelated, 1 redundant)."""
    return float(cov_offdiag_abs_mean_tensor(feats).item())


# ---------------------------------------------------------------------------------------------------------------
# Masks and EMA


@torch.no_grad()
def mask_stats_tensors(context_idx: Tensor, target_idx: Tensor, num_patches: int) -> dict[str, Tensor]:
    """Context / target sizes and their overlap (targets as the union of the K blocks per sample).

    Counts are distinct patches per sample, averaged over the batch; ratios divide them by ``num_patches``;
    ``overlap_fraction`` = target patches also present in the context / all target patches, over the batch.
    """
    if context_idx.dim() != 2:
        raise ValueError(f"mask_stats: context_idx must be [B, Nc], got shape {tuple(context_idx.shape)}")
    if target_idx.dim() != 3 or target_idx.shape[0] != context_idx.shape[0]:
        raise ValueError(
            f"mask_stats: target_idx must be [B, K, Nt] with B={context_idx.shape[0]}, got {tuple(target_idx.shape)}"
        )
    # An out-of-range index would be a device-side assert on CUDA: check first, with one host sync for both.
    for name, idx in (("context_idx", context_idx), ("target_idx", target_idx)):
        if idx.numel() == 0:
            raise ValueError(f"mask_stats: {name} is empty")
    bounds = [context_idx.min(), context_idx.max(), target_idx.min(), target_idx.max()]
    lo_ctx, hi_ctx, lo_tgt, hi_tgt = torch.stack([b.to(context_idx.device) for b in bounds]).tolist()
    for name, lo, hi in (("context_idx", lo_ctx, hi_ctx), ("target_idx", lo_tgt, hi_tgt)):
        if lo < 0 or hi >= num_patches:
            raise ValueError(f"mask_stats: {name} holds indices outside [0, {num_patches}): min {lo}, max {hi}")
    b = context_idx.shape[0]
    ctx = torch.zeros(b, num_patches, dtype=torch.bool, device=context_idx.device)
    ctx.scatter_(1, context_idx.long(), True)
    tgt = torch.zeros_like(ctx).scatter_(1, target_idx.reshape(b, -1).long().to(ctx.device), True)
    ctx_count = ctx.sum(dim=1).float()
    tgt_count = tgt.sum(dim=1).float()
    overlap = (ctx & tgt).sum().float()
    return {
        "mask/context_count": ctx_count.mean(),
        "mask/target_count": tgt_count.mean(),
        "mask/context_ratio": ctx_count.mean() / num_patches,
        "mask/target_ratio": tgt_count.mean() / num_patches,
        "mask/overlap_fraction": overlap / tgt_count.sum().clamp_min(1.0),
    }


def _paired_params(target: nn.Module, online: nn.Module) -> list[tuple[Tensor, Tensor]]:
    t_params, o_params = dict(target.named_parameters()), dict(online.named_parameters())
    if t_params.keys() != o_params.keys():
        missing = sorted(set(t_params) ^ set(o_params))[:3]
        raise ValueError(f"ema_distance: target and online parameters differ by name, e.g. {missing}")
    for name, t in t_params.items():
        if t.shape != o_params[name].shape:
            raise ValueError(
                f"ema_distance: parameter {name!r} shape {tuple(t.shape)} vs {tuple(o_params[name].shape)}"
            )
    return [(t_params[n].detach(), o_params[n].detach()) for n in t_params]


@torch.no_grad()
def ema_distance_tensors(target: nn.Module, online: nn.Module) -> dict[str, Tensor]:
    """L2 norm of (target - online) over all parameters (paired by name), absolute and relative to |online|."""
    pairs = _paired_params(target, online)
    if not pairs:
        raise ValueError("ema_distance: the modules have no parameters")
    diff_sq = torch.stack([(_wide(t) - _wide(o)).pow(2).sum() for t, o in pairs]).sum()
    online_sq = torch.stack([_wide(o).pow(2).sum() for _, o in pairs]).sum()
    dist = diff_sq.sqrt()
    return {"ema/param_l2": dist, "ema/relative_param_l2": dist / online_sq.sqrt().clamp_min(1e-12)}


def target_grad_params(target: nn.Module) -> int:
    """Target-encoder parameters that hold a ``.grad`` or require one; must be 0 for an EMA target."""
    return sum(1 for p in target.parameters() if p.requires_grad or p.grad is not None)


# ---------------------------------------------------------------------------------------------------------------
# Optimisation health


def flat_grad(params: Iterable[Tensor]) -> Tensor | None:
    """All present ``.grad`` tensors flattened into one float32 vector (a copy), or None if there are none."""
    grads = [p.grad.detach().reshape(-1).float() for p in params if p.grad is not None]
    return torch.cat(grads) if grads else None


@torch.no_grad()
def grad_cosine_tensor(g_prev: Tensor, g_now: Tensor) -> Tensor:
    """Cosine between two flattened gradients (consecutive steps: positive = consistent, negative = oscillating)."""
    a, b = _wide(g_prev.detach().reshape(-1)), _wide(g_now.detach().reshape(-1))
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
    x = _wide(w.detach())
    # ||W||_F^2 = trace(Gram) and ||W||_2^2 = largest Gram eigenvalue: the smaller Gram is cheap and exact.
    gram = x.T @ x if x.shape[0] >= x.shape[1] else x @ x.T
    top = _eigvalsh_or_nan(gram)[-1]
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
        w0 = _wide(init_state[name].to(p.device))
        if w0.shape != p.shape:
            raise ValueError(f"weight_drift_max: {name!r} init shape {tuple(w0.shape)} vs now {tuple(p.shape)}")
        w0_norm = w0.norm()
        ratios.append(torch.where(w0_norm > 0, (_wide(p) - w0).norm() / w0_norm.clamp_min(1e-30), 0.0))
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
    delta_sq = torch.stack([(_wide(a) - _wide(b)).pow(2).sum() for b, a in zip(before, after)]).sum()
    before_sq = torch.stack([_wide(b).pow(2).sum() for b in before]).sum()
    return {"health/update_ratio": delta_sq.sqrt() / before_sq.sqrt().clamp_min(1e-30)}


def update_ratio(params_before: Iterable[Tensor], params_after: Iterable[Tensor]) -> dict[str, float]:
    """Global ||Δw|| / ||w_before|| over all paired parameters (one optimiser step's relative size)."""
    return to_floats(update_ratio_tensors(params_before, params_after))


# ---------------------------------------------------------------------------------------------------------------
# Runtime and system

def memory_stats(device: torch.device | str) -> dict[str, float]:
    """CUDA allocator figures in GiB for a CUDA device (host-side counters, no sync); empty otherwise."""
    dev = torch.device(device)
    if dev.type != "cuda" or not torch.cuda.is_available():
        return {}
    return {
        "memory/cuda_allocated_gb": torch.cuda.memory_allocated(dev) / _GIB,
        "memory/cuda_reserved_gb": torch.cuda.memory_reserved(dev) / _GIB,
        "memory/cuda_peak_gb": torch.cuda.max_memory_allocated(dev) / _GIB,
    }


class SystemStats:
    """This process's CPU use since the previous reading (percent of one core, can exceed 100) and RSS in GiB.
    One per owner (the trainer's instrumentation): the CPU window is the owner's, not a module-wide one."""

    def __init__(self) -> None:
        self.process = psutil.Process()
        self.process.cpu_percent(interval=None)  # the first reading only starts the measurement window

    def __call__(self) -> dict[str, float]:
        return {"system/cpu_percent": float(self.process.cpu_percent(interval=None)),
                "system/ram_gb": self.process.memory_info().rss / _GIB}
