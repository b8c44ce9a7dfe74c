"""The failures design §8 plants on purpose, kept out of the method's own code.

A fault never changes how the step works; it changes what the step is given, at three explicit points:

- the step's settings (`faulty_settings`): an lr blow-up multiplies the scheduled lr; a target that copies the online
  encoder gets EMA momentum 0;
- the batch: a mask that leaks target patches into the context is drawn with the masks, in the data pipeline
  (`jepa_core.data.batches`, `faults.mask_leak_fraction`), so the step sees an ordinary MaskBatch;
- the step's hooks (`StepFaults`, passed to `train_step`): whether the target encoder trains (its graph is kept and
  its parameters require a grad), whether it is updated at all (a frozen target), and an extra objective term that
  pulls the context features together (collapse). That term shapes the gradient, as a real collapse's cause would,
  but is no part of the regression loss a user watches, so it never reaches the logged loss.

Every fault starts at `faults.start_step` (the 0-based update index) and stays on. Healthy steps use `HEALTHY`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TypeVar

import torch
from torch import nn

from jepa_core.config import FaultsConfig

Settings = TypeVar("Settings")  # the step's settings dataclass (jepa_core.method.step.StepSettings)


@dataclass(frozen=True)
class StepFaults:
    """What a fault changes inside one step. `train_step` calls `prepare` before the forward, `objective` on the
    loss it differentiates, and updates the target only when `update_target`."""

    target_gradients: bool = False  # the target encoder keeps its graph and trains with the optimizer
    collapse_weight: float = 0.0  # weight of the spread penalty on the context features
    update_target: bool = True  # False: the target encoder is never updated (frozen)

    @property
    def healthy(self) -> bool:
        return self == HEALTHY

    def prepare(self, model: nn.Module) -> None:
        if self.target_gradients:  # its parameters are in the optimizer from step 0 (a resume-safe layout)
            model.target_encoder.requires_grad_(True)

    def objective(self, loss: torch.Tensor, context_features: torch.Tensor) -> torch.Tensor:
        if self.collapse_weight <= 0:
            return loss
        # Shrinks the spread of context features; the EMA carries the collapse into the target encoder.
        z = context_features.float()
        spread = (z - z.mean(dim=(0, 1), keepdim=True)).pow(2).mean()
        return loss + self.collapse_weight * spread


HEALTHY = StepFaults()


def step_faults(f: FaultsConfig, step: int) -> StepFaults:
    """The hooks of update `step` (0-based)."""
    if step < f.start_step:
        return HEALTHY
    return StepFaults(target_gradients=f.target_gradients, collapse_weight=f.collapse_weight,
                      update_target=not f.frozen_target)


def faulty_settings(f: FaultsConfig, step: int, settings: Settings) -> Settings:
    """`settings` (the healthy schedule's) as the faults of update `step` change them."""
    if step < f.start_step:
        return settings
    changes = {}
    if f.lr_blowup_factor != 1.0:
        changes["lr"] = settings.lr * f.lr_blowup_factor
    if f.target_copies_online:
        changes["ema_tau"] = 0.0
    return dataclasses.replace(settings, **changes) if changes else settings
