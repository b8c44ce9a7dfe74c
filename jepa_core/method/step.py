"""One I-JEPA training step: the hot path, on one screen.

Target encoder on the whole image (no grad, layer-normed; its last block only at the target patches unless the
diagnostics read every patch), context encoder on the visible patches, predictor at the target positions, regression
loss, backward, grad norm before clipping, AdamW step, EMA update of the target.
`train_step` takes the batch, the state (`TrainState`) and the settings in force (`StepSettings`); whatever a loop
adds around the method (phase timing, gradient diagnostics, the noise-scale backward, design §8's planted faults)
plugs in at the fixed points of a `StepHooks`, whose base is the plain method.
The step reads one boolean back from the device, on purpose: whether the loss and the gradient norm are finite. A
non-finite gradient would poison every weight and both Adam moments, so that update is not taken (as AMP's
GradScaler skips one) and the caller learns it from `StepOutput.finite`; the weights stay the last finite state.
Everything else stays on the device: the diagnostics read the returned detached tensors at their cadence.
On the CPU and CUDA the optimizer is fused AdamW (one kernel per parameter group), and with `runtime.compile` the
trainer puts torch.compile'd modules in the state's `online` and `target_encoder` (sharing the model's parameters).
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
from jepa_core.method.noise_scale import Backward, BackwardResult, full_batch_backward

@dataclass
class StepSettings:
    """What the loop decides for one update; plain values, so the step itself stays a pure function of them."""

    step: int  # the update's number, counted from 1: its metrics row is logged at this step
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


@dataclass
class TrainState:
    """What an update reads and changes. `model` holds the modules that checkpoints and diagnostics read;
    `online` (context encoder + predictor) and `target_encoder` are what the step calls: the model's own, or a
    DDP or torch.compile wrapper sharing their parameters."""

    model: JEPA
    optimizer: torch.optim.Optimizer
    online: nn.Module
    target_encoder: nn.Module
    global_batch_size: int  # every rank's images together: what the diagnostics' per-sample figures divide by
    autocast: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext

    @classmethod
    def plain(cls, model: JEPA, optimizer: torch.optim.Optimizer, batch_size: int) -> TrainState:
        """One process, no wrapper, full precision."""
        return cls(model, optimizer, OnlineNetwork(model), model.target_encoder, batch_size)


@dataclass
class StepHooks:
    """The fixed points of one update where a loop's extras plug in. This base is the plain method: no fault, the
    full-batch backward, nothing read or timed. The trainer's (`jepa_core.run.step_hooks.TrainerHooks`) time the
    phases, read the gradient before clipping and measure the noise scale here; `faults` plants design §8's."""

    faults: StepFaults = HEALTHY
    backward: Backward = full_batch_backward  # or one that also measures the gradient noise scale
    # Whether the step returns the target encoder's output for every patch (`StepOutput.target_tokens`; the
    # diagnostics read it at their cadence). Otherwise the target encoder's last block computes only the patches the
    # loss reads (`VisionTransformer.forward_targets`: about a tenth of its time on `tiny`) and the field is None.
    whole_target: bool = False

    def after_backward(self) -> None:
        """This update's gradients are in `.grad`, not yet clipped."""

    def mark(self, phase: str) -> None:
        """Phase `phase` ("optimizer", "ema") of the update has just ended."""


PLAIN = StepHooks()


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
    target_tokens: torch.Tensor | None  # [B, N, D] raw target-encoder output, detached, when hooks.whole_target
    micro_grad_sq_norms: list[float] | None = None  # per micro-batch (or per rank) |g|^2, for the noise scale
    micro_batch_size: int | None = None
    finite: bool = True  # False: loss or gradient non-finite, the update was not applied

    @classmethod
    def of(cls, s: StepSettings, state: TrainState, masks: MaskBatch, result: BackwardResult,
           grad_norm: torch.Tensor, finite: bool) -> StepOutput:
        return cls(s.step, state.global_batch_size, result.loss, grad_norm.detach(), s.lr, s.wd, s.ema_tau,
                   masks.context_idx, masks.target_idx, result.pred.detach(), result.target.detach(),
                   None if result.tokens is None else result.tokens.detach(), result.small_batch_sq_norms,
                   result.small_batch_size, finite)


def target_features(state: TrainState, images: torch.Tensor, target_idx: torch.Tensor, whole: bool,
                    track_grad: bool) -> tuple[torch.Tensor | None, torch.Tensor]:
    """(raw target-encoder tokens of every patch, or None unless `whole`; the targets [B*K, Nt, D]): the loss
    regresses the targets, the parameter-free layer norm of the tokens at `target_idx`; diagnostics read the raw
    tokens, whose norms still carry information. A wrapped target encoder (torch.compile) runs the whole image."""
    with torch.set_grad_enabled(track_grad):
        if whole or state.target_encoder is not state.model.target_encoder:
            h = state.target_encoder(images)
            return h, select_targets(F.layer_norm(h, h.shape[-1:]), target_idx)
        h, where = state.model.target_encoder.forward_targets(images, target_idx)
        return None, select_targets(F.layer_norm(h, h.shape[-1:]), where)


def regression_loss(pred: torch.Tensor, target: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "mse":
        return F.mse_loss(pred, target)
    return F.smooth_l1_loss(pred, target)


def jepa_loss(state: TrainState, images: torch.Tensor, masks: MaskBatch, s: StepSettings,
              faults: StepFaults = HEALTHY, whole_target: bool = False):
    """The JEPA objective on one batch: (what is differentiated, the regression loss a user watches, pred, target,
    raw target tokens or None). The first two are one tensor twice unless a collapse fault adds its term."""
    with state.autocast():
        # target [B*K, Nt, D]: what the predictor must produce
        tokens, target = target_features(state, images, masks.target_idx, whole_target, faults.target_gradients)
        pred, z = state.online(images, masks.context_idx, masks.target_idx)
        loss = regression_loss(pred.float(), target.float(), s.loss)
        return faults.objective(loss, z), loss, pred, target, tokens


def train_step(images: torch.Tensor, masks: MaskBatch, state: TrainState, s: StepSettings,
               hooks: StepHooks = PLAIN) -> StepOutput:
    """One update of `state` on the batch (`images`, `masks`) with the settings in force."""
    faults = hooks.faults
    optimizer = state.optimizer
    _set_hyperparameters(optimizer, s.lr, s.wd)
    faults.prepare(state.model)
    # Only parameters that train now: before that fault begins, its target parameters sit idle in the optimizer.
    params = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
    optimizer.zero_grad(set_to_none=True)
    # The backward calls the objective, once or (measuring the noise scale) once per micro-batch.
    result = hooks.backward(lambda imgs, m: jepa_loss(state, imgs, m, s, faults, hooks.whole_target), images, masks,
                            params)
    hooks.after_backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(params, s.grad_clip if s.grad_clip > 0 else float("inf"))
    # Under DDP a rank's non-finite loss makes the all-reduced gradient, hence every rank's norm, non-finite too:
    # every rank takes the same decision at the same step.
    finite = bool(torch.isfinite(result.loss).logical_and(torch.isfinite(grad_norm)))
    if finite:
        optimizer.step()
    hooks.mark("optimizer")
    if finite and faults.update_target:
        ema_update_(state.model.target_encoder, state.model.context_encoder, s.ema_tau)
    hooks.mark("ema")
    return StepOutput.of(s, state, masks, result, grad_norm, finite)


def _set_hyperparameters(optimizer: torch.optim.Optimizer, lr: float, wd: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
        # Norms, biases and position-free scalars keep weight decay off (their group starts at 0).
        group["weight_decay"] = wd if group.get("decay", True) else 0.0


def build_optimizer(model: JEPA, betas: tuple[float, float], extra_params: list[nn.Parameter] = ()
                    ) -> torch.optim.AdamW:
    """AdamW with two groups: matrices decay, vectors (norms, biases, mask token) do not. Build it after the model
    is on its device: on the CPU and CUDA the update is fused (one kernel per group instead of a loop of small ones:
    0.44 against 1.40 ms an update on `tiny`'s CPU step, the same update up to rounding); elsewhere multi-tensor."""
    decay, no_decay = [], []
    for module in (model.context_encoder, model.predictor):
        for p in module.parameters():
            if p.requires_grad:
                (decay if p.ndim >= 2 else no_decay).append(p)
    decay.extend(extra_params)
    groups = [{"params": decay, "decay": True}, {"params": no_decay, "decay": False}]
    if {p.device.type for group in groups for p in group["params"]} <= {"cpu", "cuda"}:
        return torch.optim.AdamW(groups, lr=0.0, betas=betas, fused=True)
    return torch.optim.AdamW(groups, lr=0.0, betas=betas, foreach=True)
