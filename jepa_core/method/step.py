"""One I-JEPA training step: the hot path.

Context encoder on the visible patches, target encoder on the whole image (no grad, layer-normed), predictor at the
target positions, regression loss, backward, grad norm before clipping, AdamW step, EMA update of the target.
The step reads one boolean back from the device, on purpose: whether the loss and the gradient norm are finite. A
non-finite gradient would poison every weight and both Adam moments, so that update is not taken (as AMP's
GradScaler skips one) and the caller learns it from `StepOutput.finite`; the weights stay the last finite state.
Everything else stays on the device: the diagnostics read the returned detached tensors at their cadence.
On CUDA the optimizer is fused AdamW (one kernel per parameter group), and with `runtime.compile` the trainer passes
torch.compile'd modules as `online` and `target_encoder` (they share the parameters of `model`). A `PhaseTimer`,
passed at the logging cadence only, marks forward+backward, optimizer and EMA (CUDA events: no extra sync).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from jepa_core.method.ema import ema_update_
from jepa_core.method.masks import MaskBatch
from jepa_core.method.model import JEPA, select_targets
from jepa_core.method.runtime import PhaseTimer


@dataclass
class StepOutput:
    step: int
    batch_size: int  # global batch
    loss: torch.Tensor  # scalar, detached
    grad_norm: torch.Tensor  # scalar, before clipping
    lr: float
    wd: float
    ema_tau: float
    context_idx: torch.Tensor  # [B, Nc]
    target_idx: torch.Tensor  # [B, K, Nt]
    pred: torch.Tensor  # [B*K, Nt, D] predictor output, detached
    target: torch.Tensor  # [B*K, Nt, D] layer-normed target features, detached
    target_tokens: torch.Tensor  # [B, N, D] raw target-encoder output for the whole image, detached
    micro_grad_sq_norms: list[float] | None = None  # per micro-batch (or per rank) |g|^2, for the noise scale
    micro_batch_size: int | None = None
    finite: bool = True  # False: loss or gradient non-finite, the update was not applied


@dataclass
class StepSettings:
    """What the loop decides for this step; plain values, so the step itself stays a pure function of them."""

    lr: float
    wd: float
    ema_tau: float
    loss: str = "smooth_l1"
    grad_clip: float = 1.0
    micro_batches: int = 1  # > 1 only at the noise-scale cadence (single process)
    rank_grad_norms: bool = False  # under DDP at the noise-scale cadence: each rank's gradient is a small batch
    update_target: bool = True  # False reproduces a frozen target encoder
    target_gradients: bool = False  # fault: targets keep their graph
    collapse_weight: float = 0.0  # fault: pull context features to the batch mean


class OnlineNetwork(nn.Module):
    """The trained half of the model (context encoder + predictor) as one module, so DDP can wrap it."""

    def __init__(self, model: JEPA):
        super().__init__()
        self.context_encoder = model.context_encoder
        self.predictor = model.predictor

    def forward(self, images: torch.Tensor, context_idx: torch.Tensor, target_idx: torch.Tensor):
        z = self.context_encoder(images, context_idx)
        return self.predictor(z, context_idx, target_idx), z


def target_features(target_encoder: nn.Module, images: torch.Tensor, track_grad: bool,
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """(raw target-encoder tokens, their parameter-free layer norm): the loss regresses the latter; diagnostics
    read the former, whose norms still carry information."""
    with torch.set_grad_enabled(track_grad):
        h = target_encoder(images)
        return h, F.layer_norm(h, h.shape[-1:])


def regression_loss(pred: torch.Tensor, target: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "mse":
        return F.mse_loss(pred, target)
    return F.smooth_l1_loss(pred, target)


def _forward_loss(online: nn.Module, target_encoder: nn.Module, images: torch.Tensor, masks: MaskBatch,
                  s: StepSettings):
    """(objective to differentiate, regression loss to log, pred, target, target tokens).

    They are one tensor unless the collapse fault is on: its penalty shapes the gradient, as a real collapse's
    cause would, but is no part of the regression loss a user watches (SPEC §8), so it never reaches the log."""
    tokens, normed = target_features(target_encoder, images, track_grad=s.target_gradients)
    target = select_targets(normed, masks.target_idx)
    pred, z = online(images, masks.context_idx, masks.target_idx)
    loss = regression_loss(pred.float(), target.float(), s.loss)
    objective = loss
    if s.collapse_weight > 0:
        # Shrinks the spread of context features; the EMA carries the collapse into the target encoder.
        spread = (z.float() - z.float().mean(dim=(0, 1), keepdim=True)).pow(2).mean()
        objective = loss + s.collapse_weight * spread
    return objective, loss, pred, target, tokens


def _split(images: torch.Tensor, masks: MaskBatch, parts: int):
    for imgs, ctx, tgt in zip(images.chunk(parts), masks.context_idx.chunk(parts), masks.target_idx.chunk(parts)):
        yield imgs, MaskBatch(context_idx=ctx, target_idx=tgt)


def _micro_batch_backward(online, target_encoder, images, masks, s, params, autocast):
    """Gradient of the full batch as the mean of micro-batch gradients, keeping each micro-batch's |g|^2."""
    losses, preds, targets, token_list, sq_norms = [], [], [], [], []
    total = [torch.zeros_like(p) for p in params]
    for imgs, m in _split(images, masks, s.micro_batches):
        with autocast():
            objective, loss, pred, target, tokens = _forward_loss(online, target_encoder, imgs, m, s)
        grads = torch.autograd.grad(objective, params, allow_unused=True)
        grads = [torch.zeros_like(p) if g is None else g for g, p in zip(grads, params)]
        sq_norms.append(torch.stack([g.float().pow(2).sum() for g in grads]).sum())
        torch._foreach_add_(total, grads)
        losses.append(loss.detach())
        preds.append(pred.detach())
        targets.append(target.detach())
        token_list.append(tokens.detach())
    for p, g in zip(params, total):
        p.grad = g / s.micro_batches
    return (torch.stack(losses).mean(), torch.cat(preds), torch.cat(targets), torch.cat(token_list),
            torch.stack(sq_norms).tolist())


def _average_rank_gradients(params: list[nn.Parameter]) -> list[float]:
    """After a backward without DDP's all-reduce: read each rank's |g|^2, then average the gradients by hand."""
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


def _set_hyperparameters(optimizer: torch.optim.Optimizer, lr: float, wd: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
        # Norms, biases and position-free scalars keep weight decay off (their group starts at 0).
        group["weight_decay"] = wd if group.get("decay", True) else 0.0


def train_step(
    step: int,
    online: nn.Module,
    model: JEPA,
    optimizer: torch.optim.Optimizer,
    images: torch.Tensor,
    masks: MaskBatch,
    s: StepSettings,
    global_batch_size: int,
    autocast: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
    after_backward: Callable[[], None] | None = None,
    target_encoder: nn.Module | None = None,
    timer: PhaseTimer | None = None,
) -> StepOutput:
    """One update. `target_encoder` defaults to `model.target_encoder` (a compiled wrapper of it may be passed);
    `timer`, when given, is marked after each phase."""
    target_encoder = model.target_encoder if target_encoder is None else target_encoder
    _set_hyperparameters(optimizer, s.lr, s.wd)
    if s.target_gradients:  # fault: the target's parameters train from now on (the optimizer already holds them)
        model.target_encoder.requires_grad_(True)
    # Only parameters that train now: before that fault begins, its target parameters sit idle in the optimizer.
    params = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
    optimizer.zero_grad(set_to_none=True)
    micro = None
    if s.micro_batches > 1:
        loss, pred, target, tokens, micro = _micro_batch_backward(online, target_encoder, images, masks, s, params,
                                                                  autocast)
    elif s.rank_grad_norms:
        with online.no_sync():  # the forward too: DDP decides at forward time whether backward all-reduces
            with autocast():
                objective, loss, pred, target, tokens = _forward_loss(online, target_encoder, images, masks, s)
            objective.backward()
        micro = _average_rank_gradients(params)
        loss = loss.detach()
    else:
        with autocast():
            objective, loss, pred, target, tokens = _forward_loss(online, target_encoder, images, masks, s)
        objective.backward()
        loss = loss.detach()
    if timer is not None:
        timer.mark("forward_backward")
    if after_backward is not None:
        after_backward()
        if timer is not None:
            timer.mark("diagnostics")
    max_norm = s.grad_clip if s.grad_clip > 0 else float("inf")
    grad_norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    # Under DDP a rank's non-finite loss makes the all-reduced gradient, hence every rank's norm, non-finite too:
    # every rank takes the same decision at the same step.
    finite = bool(torch.isfinite(loss).logical_and(torch.isfinite(grad_norm)))
    if finite:
        optimizer.step()
    if timer is not None:
        timer.mark("optimizer")
    if finite and s.update_target:
        ema_update_(model.target_encoder, model.context_encoder, s.ema_tau)
    if timer is not None:
        timer.mark("ema")
    return StepOutput(
        step=step,
        batch_size=global_batch_size,
        loss=loss,
        grad_norm=grad_norm.detach(),
        lr=s.lr,
        wd=s.wd,
        ema_tau=s.ema_tau,
        context_idx=masks.context_idx,
        target_idx=masks.target_idx,
        pred=pred.detach(),
        target=target.detach(),
        target_tokens=tokens.detach(),
        micro_grad_sq_norms=micro,
        micro_batch_size=images.shape[0] // s.micro_batches if micro else None,  # per rank under DDP
        finite=finite,
    )


def build_optimizer(model: JEPA, betas: tuple[float, float], extra_params: list[nn.Parameter] = (),
                    fused: bool = False) -> torch.optim.AdamW:
    """AdamW with two groups: matrices decay, vectors (norms, biases, mask token) do not. `fused` (CUDA only: the
    trainer asks for it there) updates every parameter of a group in one kernel instead of a loop of small ones."""
    decay, no_decay = [], []
    for module in (model.context_encoder, model.predictor):
        for p in module.parameters():
            if p.requires_grad:
                (decay if p.ndim >= 2 else no_decay).append(p)
    decay.extend(extra_params)
    groups = [{"params": decay, "decay": True}, {"params": no_decay, "decay": False}]
    if fused:
        return torch.optim.AdamW(groups, lr=0.0, betas=betas, fused=True)
    return torch.optim.AdamW(groups, lr=0.0, betas=betas)
