"""The gradient noise scale's readings inside a step (design §6, weights_health): a backward that also measures.

The noise scale needs |g|^2 at two batch sizes. At its cadence the trainer hands `train_step` one of these
backwards instead of the plain one; each leaves in `.grad` the gradient of the whole batch, the same as the plain
backward up to floating-point rounding (tests/test_step.py checks it on one step), and returns the small-batch
|g|^2 readings beside it:

- `MicroBatchBackward(parts)` (one process): the batch split in `parts`, each part's gradient kept for its |g|^2, the
  batch's gradient their mean;
- `RankGradientsBackward(online)` (DDP): each rank's own gradient is a small batch; read before averaging by hand.

A backward takes `forward(images, masks) -> (objective, loss, pred, target, tokens)` (the step's loss, autocast
included), the batch and the parameters that train, and returns a `BackwardResult`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from jepa_core.method.masks import MaskBatch

Forward = Callable[[torch.Tensor, MaskBatch], tuple[torch.Tensor, ...]]


@dataclass
class BackwardResult:
    loss: torch.Tensor  # the regression loss, detached
    pred: torch.Tensor
    target: torch.Tensor
    tokens: torch.Tensor | None  # the target encoder's tokens of every patch, when the step asked for them
    small_batch_sq_norms: list[float] | None = None  # |g|^2 of each small batch, for the noise scale
    small_batch_size: int | None = None  # images in one small batch (per rank under DDP)


Backward = Callable[[Forward, torch.Tensor, MaskBatch, list[nn.Parameter]], BackwardResult]


def full_batch_backward(forward: Forward, images: torch.Tensor, masks: MaskBatch,
                        params: list[nn.Parameter]) -> BackwardResult:
    """The plain backward: no measurement."""
    objective, loss, pred, target, tokens = forward(images, masks)
    objective.backward()
    return BackwardResult(loss.detach(), pred, target, tokens)


def _split(images: torch.Tensor, masks: MaskBatch, parts: int):
    for imgs, ctx, tgt in zip(images.chunk(parts), masks.context_idx.chunk(parts), masks.target_idx.chunk(parts)):
        yield imgs, MaskBatch(context_idx=ctx, target_idx=tgt)


@dataclass(frozen=True)
class MicroBatchBackward:
    """Gradient of the full batch as the mean of micro-batch gradients, keeping each micro-batch's |g|^2."""

    parts: int

    def __call__(self, forward: Forward, images: torch.Tensor, masks: MaskBatch,
                 params: list[nn.Parameter]) -> BackwardResult:
        losses, preds, targets, token_list, sq_norms = [], [], [], [], []
        total = [torch.zeros_like(p) for p in params]
        for imgs, m in _split(images, masks, self.parts):
            objective, loss, pred, target, tokens = forward(imgs, m)
            grads = torch.autograd.grad(objective, params, allow_unused=True)
            grads = [torch.zeros_like(p) if g is None else g for g, p in zip(grads, params)]
            sq_norms.append(torch.stack([g.float().pow(2).sum() for g in grads]).sum())
            torch._foreach_add_(total, grads)
            losses.append(loss.detach())
            preds.append(pred.detach())
            targets.append(target.detach())
            token_list.append(None if tokens is None else tokens.detach())
        for p, g in zip(params, total):
            p.grad = g / self.parts
        tokens = None if token_list[0] is None else torch.cat(token_list)
        return BackwardResult(torch.stack(losses).mean(), torch.cat(preds), torch.cat(targets), tokens,
                              torch.stack(sq_norms).tolist(), images.shape[0] // self.parts)


@dataclass(frozen=True)
class RankGradientsBackward:
    """Under DDP: a backward without the all-reduce, each rank's |g|^2 read, then the gradients averaged by hand."""

    online: nn.Module  # the DDP-wrapped online network

    def __call__(self, forward: Forward, images: torch.Tensor, masks: MaskBatch,
                 params: list[nn.Parameter]) -> BackwardResult:
        with self.online.no_sync():  # the forward too: DDP decides at forward time whether backward all-reduces
            objective, loss, pred, target, tokens = forward(images, masks)
            objective.backward()
        return BackwardResult(loss.detach(), pred, target, tokens, _average_rank_gradients(params), images.shape[0])


def _average_rank_gradients(params: list[nn.Parameter]) -> list[float]:
    import torch.distributed as dist

    grads = [p.grad for p in params if p.grad is not None]
    local = torch.stack([g.float().pow(2).sum() for g in grads]).sum().reshape(1)
    gathered = [torch.zeros_like(local) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, local)
    flat = torch._utils._flatten_dense_tensors(grads)
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    for g, averaged in zip(grads, torch._utils._unflatten_dense_tensors(flat, grads)):
        g.copy_(averaged)
    return torch.cat(gathered).tolist()


def backward_for(measure: bool, micro_batches: int, online: nn.Module, distributed: bool) -> Backward:
    """The backward of a step: measuring at the noise scale's cadence (`measure`), plain otherwise."""
    if not measure:
        return full_batch_backward
    if distributed:
        return RankGradientsBackward(online)
    return MicroBatchBackward(micro_batches) if micro_batches > 1 else full_batch_backward
