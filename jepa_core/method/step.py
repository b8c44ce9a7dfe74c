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
from jepa_core.method.faults import HEALTHY, StepFaults
from jepa_core.method.masks import MaskBatch
from jepa_core.method.model import JEPA, select_targets
from jepa_core.method.noise_scale import Backward, full_batch_backward
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
                  s: StepSettings, faults: StepFaults):
    """(objective to differentiate, regression loss to log, pred, target, target tokens): one tensor twice unless a
    fault adds to the objective (it never reaches the logged loss)."""
    tokens, normed = target_features(target_encoder, images, track_grad=faults.target_gradients)
    target = select_targets(normed, masks.target_idx)
    pred, z = online(images, masks.context_idx, masks.target_idx)
    loss = regression_loss(pred.float(), target.float(), s.loss)
    return faults.objective(loss, z), loss, pred, target, tokens


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
    faults: StepFaults = HEALTHY,
    backward: Backward = full_batch_backward,
) -> StepOutput:
    """One update. `target_encoder` defaults to `model.target_encoder` (a compiled wrapper of it may be passed);
    `timer`, when given, is marked after each phase; `faults` (design §8, jepa_core.method.faults) only in the
    detection benchmark's planted failures; `backward` measures the gradient noise scale at its cadence
    (jepa_core.method.noise_scale) and leaves the same gradient up to rounding."""
    target_encoder = model.target_encoder if target_encoder is None else target_encoder
    _set_hyperparameters(optimizer, s.lr, s.wd)
    faults.prepare(model)
    # Only parameters that train now: before that fault begins, its target parameters sit idle in the optimizer.
    params = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
    optimizer.zero_grad(set_to_none=True)

    def forward(imgs: torch.Tensor, m: MaskBatch):
        with autocast():
            return _forward_loss(online, target_encoder, imgs, m, s, faults)

    result = backward(forward, images, masks, params)
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
    loss = result.loss
    finite = bool(torch.isfinite(loss).logical_and(torch.isfinite(grad_norm)))
    if finite:
        optimizer.step()
    if timer is not None:
        timer.mark("optimizer")
    if finite and faults.update_target:
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
        pred=result.pred.detach(),
        target=result.target.detach(),
        target_tokens=result.tokens.detach(),
        micro_grad_sq_norms=result.small_batch_sq_norms,
        micro_batch_size=result.small_batch_size,
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
    # Elsewhere the multi-tensor (foreach) update: bit for bit the per-parameter loop's, in fewer calls.
    return torch.optim.AdamW(groups, lr=0.0, betas=betas, foreach=True)
