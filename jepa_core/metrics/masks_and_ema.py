"""The diagnostics of the JEPA's own machinery (design §6, the `mask_check`, `param_distance` and `fixed_batch`
groups): the sizes and overlap of the context and target masks, and the EMA target: its distance to the online
encoder, in weights and in features, and that it takes no gradients.

Two forms per metric, as `jepa_core.metrics.diagnostics` describes.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from jepa_core.metrics.diagnostics import wide

__all__ = ["mask_stats_tensors", "ema_distance_tensors", "fixed_batch_distance_tensor", "target_grad_params"]


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
    diff_sq = torch.stack([(wide(t) - wide(o)).pow(2).sum() for t, o in pairs]).sum()
    online_sq = torch.stack([wide(o).pow(2).sum() for _, o in pairs]).sum()
    dist = diff_sq.sqrt()
    return {"ema/param_l2": dist, "ema/relative_param_l2": dist / online_sq.sqrt().clamp_min(1e-12)}


@torch.no_grad()
def fixed_batch_distance_tensor(target_features: Tensor, online_features: Tensor) -> Tensor:
    """|target - online| / |online| over the two encoders' features of the same images: exactly 0 when the target's
    weights equal the online ones (the same forward on the same input), a function-space twin of
    ``ema/relative_param_l2`` that is cheap enough to read as often as the fixed batch."""
    if target_features.shape != online_features.shape:
        raise ValueError(f"fixed_batch_distance: feature shapes differ, {tuple(target_features.shape)} vs "
                         f"{tuple(online_features.shape)}")
    t, o = wide(target_features), wide(online_features)
    return (t - o).pow(2).sum().sqrt() / o.pow(2).sum().sqrt().clamp_min(1e-12)


def target_grad_params(target: nn.Module) -> int:
    """Target-encoder parameters that hold a ``.grad`` or require one; must be 0 for an EMA target."""
    return sum(1 for p in target.parameters() if p.requires_grad or p.grad is not None)
