"""What each step group of the registry measures (design §6): one function per group, over one `StepContext`.

`MEASURE` maps each group of ``registry.STEP_GROUPS`` to the function that measures it; `jepa_core.metrics.instrument`
decides when a group is due, runs it and reads everything back. A function returns 0-d tensors where it can, so the
hook's one read-back per device covers every group due at a step. Adding a metric means editing one function here
and registering its name in the registry, never the trainer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor, nn

from jepa_core.common.seeds import diagnostic_generator, fixed_probe_generator
from jepa_core.method.runtime import eta_seconds
from jepa_core.metrics import registry
from jepa_core.metrics.masks_and_ema import (ema_distance_tensors, fixed_batch_distance_tensor, mask_stats_tensors,
                                             target_grad_params)
from jepa_core.metrics.representation import (
    cov_offdiag_abs_mean_tensor,
    effective_rank_tensor,
    prediction_agreement_tensors,
    representation_stats_tensors,
    subsample_rows,
)
from jepa_core.metrics.system_stats import SystemStats, memory_stats
from jepa_core.metrics.weights_health import stable_rank_min_tensors, update_ratio_tensors, weight_drift_max_tensors

__all__ = ["MEASURE", "TARGET_TOKEN_GROUPS", "StepContext", "Metrics", "HookState", "GNS_BIG_KEY",
           "FIXED_PROBE_IMAGES", "unwrap_jepa", "online_module", "trainable_params"]

_PRED_KEYS = tuple(m.name for m in registry.in_group("representation") if m.name.startswith("pred/"))  # §6 subset
GNS_BIG_KEY = "_gns/big_sq_norm"  # read back with the other tensors, consumed, never logged
FIXED_PROBE_IMAGES = 8  # images in the fixed probe batch of the fixed_batch group


def unwrap_jepa(model: Any) -> Any:
    """The JEPA behind DDP (``.module``) or torch.compile (``._orig_mod``) wrappers."""
    for attr in ("module", "_orig_mod"):
        while hasattr(model, attr) and not hasattr(model, "context_encoder"):
            model = getattr(model, attr)
    return model


def online_module(model: Any) -> nn.ModuleDict:
    """Context encoder + predictor as one module (a view: no copy), parameter names prefixed by the part."""
    m = unwrap_jepa(model)
    return nn.ModuleDict({"context_encoder": m.context_encoder, "predictor": m.predictor})


def trainable_params(module: nn.Module) -> list[Tensor]:
    return [p for p in module.parameters() if p.requires_grad]


@dataclass
class StepContext:
    """One step's inputs, with the token subsamples shared by the groups that need them."""

    out: Any
    model: Any
    step_seconds: float
    data_seconds: float | None  # None: the loop did not say (a monitored loop)
    max_tokens: int

    def _generator(self, salt: int) -> torch.Generator:
        # Seeded from the step, so a resumed run draws the same tokens as the uninterrupted one.
        return diagnostic_generator(int(self.out.step), salt)

    @functools.cached_property
    def target_tokens(self) -> Tensor:
        """The target encoder's tokens of every patch [B, N, D] (the trainer asks the step for them where a group in
        TARGET_TOKEN_GROUPS is due)."""
        if self.out.target_tokens is None:
            raise ValueError("the step did not return the target encoder's tokens of every patch")
        return self.out.target_tokens.detach()

    @functools.cached_property
    def target_rows(self) -> Tensor:
        tokens = self.target_tokens
        return subsample_rows(tokens.reshape(-1, tokens.shape[-1]).float(), self.max_tokens,
                              self._generator(0))

    @functools.cached_property
    def pred_rows(self) -> Tensor:
        pred = self.out.pred
        return subsample_rows(pred.detach().reshape(-1, pred.shape[-1]).float(), self.max_tokens,
                              self._generator(1))


Metrics = dict[str, "Tensor | float | int"]


class HookState(Protocol):
    """What the groups read of the hook that runs them (and, for the probe batch, write): the state of
    `jepa_core.metrics.instrument.Instrumentation`, named here by its shape because that module imports this one.
    The underscored members are the hook's gradient snapshots and probe batch, kept there between steps."""

    device: torch.device
    total_steps: int
    init_state: dict[str, Tensor]
    system_stats: SystemStats
    _probe_images: Tensor | None
    _grad_cosine: tuple[int, Tensor] | None
    _params_before: tuple[int, list[Tensor]] | None

    @property
    def smoothed_step_seconds(self) -> float: ...


# ---------------------------------------------------------------------------------------------------------------
# The groups


def _basic(inst: HookState, ctx: StepContext) -> Metrics:
    out = ctx.out
    metrics: Metrics = {
        "loss": out.loss.detach() if isinstance(out.loss, Tensor) else float(out.loss),
        "lr": float(out.lr), "wd": float(out.wd), "ema_tau": float(out.ema_tau),
        "global_batch_size": int(out.batch_size),
    }
    # A loop watched by jepa_core.monitor may not report a gradient norm or its data time: left out, not made up.
    if out.grad_norm is not None:
        metrics["grad_norm"] = out.grad_norm.detach() if isinstance(out.grad_norm, Tensor) else float(out.grad_norm)
    epoch = getattr(out, "epoch", None)
    if epoch is not None:
        metrics["epoch"] = float(epoch)
    metrics["time/step_seconds"] = ctx.step_seconds
    if ctx.data_seconds is not None:
        metrics["time/data_seconds"] = ctx.data_seconds
    if ctx.step_seconds > 0:
        metrics["time/samples_per_second"] = out.batch_size / ctx.step_seconds
    metrics["time/eta_seconds"] = eta_seconds(int(out.step), inst.total_steps, inst.smoothed_step_seconds)
    metrics.update(memory_stats(inst.device))
    metrics.update(inst.system_stats())
    return metrics


def _representation(inst: HookState, ctx: StepContext) -> Metrics:
    metrics: Metrics = dict(prediction_agreement_tensors(ctx.out.pred, ctx.out.target))
    # Spread statistics over target patch tokens (what the predictor regresses), subsampled.
    metrics.update(representation_stats_tensors(ctx.target_rows, "target"))
    pred = representation_stats_tensors(ctx.pred_rows, "pred")
    metrics.update({k: pred[k] for k in _PRED_KEYS})
    return metrics


def _covariance(inst: HookState, ctx: StepContext) -> Metrics:
    pooled = ctx.target_tokens.float().mean(dim=1)  # per-image features [B, D]: rank <= B
    return {
        "target/effective_rank": effective_rank_tensor(pooled),
        "target/token_effective_rank": effective_rank_tensor(ctx.target_rows),
        "target/cov_offdiag_abs_mean": cov_offdiag_abs_mean_tensor(ctx.target_rows),
        "pred/effective_rank": effective_rank_tensor(ctx.pred_rows),
    }


def _param_distance(inst: HookState, ctx: StepContext) -> Metrics:
    m = unwrap_jepa(ctx.model)
    return dict(ema_distance_tensors(m.target_encoder, m.context_encoder))


@torch.no_grad()
def _fixed_batch(inst: HookState, ctx: StepContext) -> Metrics:
    """The target and the online encoder on one FIXED probe batch: the same input every time, so the target's
    statistics carry no sampling noise (a slow fall stands out of its trend), a target encoder that is never updated
    gives bit-identical values, and one that copies the online encoder gives exactly the online features (training-
    batch statistics change with the batch and cannot show either). The probe is seeded noise of the encoder's
    input shape: no data, two small forwards."""
    m = unwrap_jepa(ctx.model)
    target, online = m.target_encoder, m.context_encoder
    if inst._probe_images is None:
        # (C, H, W) of the encoder's input: given to a monitor watching another loop's encoder, else ours
        shape = getattr(inst, "probe_shape", None) or (target.patch_embed.in_channels, target.img_size,
                                                        target.img_size)
        inst._probe_images = torch.randn(FIXED_PROBE_IMAGES, *shape, generator=fixed_probe_generator())
    images = inst._probe_images.to(next(target.parameters()).device)
    target_tokens, online_tokens = target(images).float(), online(images).float()
    rows = target_tokens.reshape(-1, target_tokens.shape[-1])
    online_rows = online_tokens.reshape(-1, online_tokens.shape[-1])
    return {"target/fixed_batch_std_mean": rows.std(dim=0, correction=0).mean(),
            "online/fixed_batch_std_mean": online_rows.std(dim=0, correction=0).mean(),
            "target/fixed_batch_norm_mean": rows.norm(dim=1).mean(),
            "ema/fixed_batch_distance": fixed_batch_distance_tensor(target_tokens, online_tokens)}


def _mask_check(inst: HookState, ctx: StepContext) -> Metrics:
    out = ctx.out
    num_patches = unwrap_jepa(ctx.model).num_patches if out.target_tokens is None else out.target_tokens.shape[1]
    metrics: Metrics = dict(mask_stats_tensors(out.context_idx, out.target_idx, num_patches))
    metrics["ema/target_grad_params"] = target_grad_params(unwrap_jepa(ctx.model).target_encoder)
    return metrics


def _weights_health(inst: HookState, ctx: StepContext) -> Metrics:
    step = int(ctx.out.step)
    online = online_module(ctx.model)
    metrics: Metrics = {}
    if inst._grad_cosine is not None and inst._grad_cosine[0] == step:
        metrics["health/grad_cosine_prev"] = inst._grad_cosine[1]
    # The noise scale needs |grad|^2 as a float: it joins the single read-back and is finished in after_step.
    micro, micro_bs = getattr(ctx.out, "micro_grad_sq_norms", None), getattr(ctx.out, "micro_batch_size", None)
    if micro and micro_bs and micro_bs < ctx.out.batch_size and isinstance(ctx.out.grad_norm, Tensor):
        metrics[GNS_BIG_KEY] = ctx.out.grad_norm.detach().float().pow(2)
    metrics.update(stable_rank_min_tensors(online))
    metrics.update(weight_drift_max_tensors(online["context_encoder"], inst.init_state))
    if inst._params_before is not None and inst._params_before[0] == step:
        metrics.update(update_ratio_tensors(inst._params_before[1], trainable_params(online)))
    return metrics


# The measuring function of each step group of the registry, by group name.
# The groups that read the target encoder's tokens of every patch (`StepOutput.target_tokens`).
TARGET_TOKEN_GROUPS = frozenset({"representation", "covariance"})
MEASURE: dict[str, Callable[[HookState, StepContext], Metrics]] = {
    "basic": _basic, "representation": _representation, "fixed_batch": _fixed_batch, "covariance": _covariance,
    "param_distance": _param_distance, "mask_check": _mask_check, "weights_health": _weights_health,
}
