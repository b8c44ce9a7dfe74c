"""The representation diagnostics of design §6 (the `representation` and `covariance` groups): how well the
predictor matches its targets, the spread of the features, their effective rank and their correlation.

Two forms per metric, as `jepa_core.metrics.diagnostics` describes.
"""

from __future__ import annotations

import torch
from torch import Tensor

from jepa_core.metrics.diagnostics import eigvalsh_or_nan, feature_rows, wide

__all__ = [
    "DEFAULT_DEAD_EPS", "prediction_agreement_tensors", "representation_stats_tensors", "effective_rank",
    "effective_rank_tensor", "subsample_rows", "token_effective_rank", "cov_offdiag_abs_mean",
    "cov_offdiag_abs_mean_tensor",
]

# Relative threshold for a "dead" dimension: its std below this fraction of the features' RMS magnitude.
# RMS (not the mean std) is the reference so that a fully collapsed representation still reads as dead.
DEFAULT_DEAD_EPS = 1e-2
# Singular values below this fraction of the largest are below what the Gram route can resolve in float64
# (it squares the condition number), so they are treated as exact zeros.
_GRAM_REL_CUTOFF = 1e-7


@torch.no_grad()
def prediction_agreement_tensors(pred: Tensor, target: Tensor) -> dict[str, Tensor]:
    """MSE, MAE and mean per-token cosine between predictor output and targets (any shape [..., D])."""
    if pred.shape != target.shape:
        raise ValueError(f"prediction_agreement: pred {tuple(pred.shape)} and target {tuple(target.shape)} differ")
    p, t = feature_rows(pred, "pred"), feature_rows(target, "target")
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
    x = feature_rows(feats, f"representation_stats[{prefix}]")
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


@torch.no_grad()
def _singular_values_via_gram(x: Tensor) -> Tensor:
    """Singular values of x [N, D] from the eigenvalues of the smaller Gram matrix (float64), no SVD of x."""
    x = wide(x)
    gram = x.T @ x if x.shape[0] >= x.shape[1] else x @ x.T
    eig = eigvalsh_or_nan(gram).clamp_min(0.0)
    eig = torch.where(eig < eig.max() * _GRAM_REL_CUTOFF**2, torch.zeros_like(eig), eig)
    return eig.sqrt()


@torch.no_grad()
def effective_rank_tensor(feats: Tensor) -> Tensor:
    x = feature_rows(feats, "effective_rank")
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


def lidar_tensor(samples: Tensor, delta: float = 1e-4) -> Tensor:
    """LiDAR (Thilak et al. 2023): the effective rank of the linear-discriminant matrix of surrogate classes.

    `samples` [n, q, D]: q embeddings of each of n surrogate classes (n >= 2, q >= 2). With the class means mu_i and
    their mean mu, the between-class covariance S_b = cov(mu_i) and the within-class one S_w (pooled over classes,
    plus `delta` times its mean eigenvalue so that it inverts), LiDAR is exp(entropy) of the normalised eigenvalues
    of S_w^-1/2 S_b S_w^-1/2: how many directions separate the classes beyond their own spread. Between 1 and
    min(n - 1, D). In float64: the whitening squares the conditioning. NaN for non-finite input, without a host sync.
    """
    if samples.dim() != 3 or samples.shape[0] < 2 or samples.shape[1] < 2:
        raise ValueError(f"lidar: expected samples [classes >= 2, samples >= 2, D], got {tuple(samples.shape)}")
    x = samples.detach().double()
    finite = torch.isfinite(x).all()
    x = torch.where(finite, x, torch.zeros_like(x))
    n, q, dim = x.shape
    means = x.mean(dim=1)  # [n, D]
    between = (means - means.mean(dim=0)).T @ (means - means.mean(dim=0)) / (n - 1)
    spread = (x - means[:, None, :]).reshape(n * q, dim)
    within = spread.T @ spread / (n * (q - 1))
    eye = torch.eye(dim, dtype=x.dtype, device=x.device)
    within = within + (delta * within.diagonal().mean().clamp_min(1e-30)) * eye
    values, vectors = torch.linalg.eigh(within)
    whiten = vectors @ torch.diag(values.clamp_min(1e-30).rsqrt()) @ vectors.T
    eig = torch.linalg.eigvalsh(whiten @ between @ whiten).clamp_min(0)
    p = eig / (eig.sum() + 1e-300)
    rank = (-(p * torch.log(p.clamp_min(1e-300))).sum()).exp()
    return torch.where(finite, rank, torch.full_like(rank, float("nan"))).float()


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
    rows = feature_rows(tokens, "token_effective_rank")
    return float(effective_rank_tensor(subsample_rows(rows, max_tokens, generator)))


@torch.no_grad()
def cov_offdiag_abs_mean_tensor(feats: Tensor) -> Tensor:
    x = wide(feature_rows(feats, "cov_offdiag_abs_mean"))
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
