"""The cadence-driven hook the trainer calls after every step (design §6).

The trainer only ever calls ``wants_micro_grads`` / ``wants_grads`` / ``after_backward`` / ``after_step`` and logs
what ``after_step`` returns. Metrics live in the cadence groups (``GROUPS``, named with their cadence keys by
``jepa_core.metrics.registry``, measured by the functions of ``jepa_core.metrics.measures``): adding a metric means
editing one group function there and registering the name in the registry, never the trainer. Everything due at
a step is gathered as 0-d tensors and read back with one ``.tolist()`` per device, so a step costs at most one host
sync, and nothing when no group is due.

Step numbers are the trainer's logged steps (its k-th update is step k, 1-based); a group is due at step k when
``k % <group>_every_steps == 0``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from jepa_core.method.model import param_counts
from jepa_core.metrics import registry
from jepa_core.metrics.diagnostics import to_floats
from jepa_core.metrics.measures import (
    GNS_BIG_KEY,
    MEASURE,
    TARGET_TOKEN_GROUPS,
    Metrics,
    StepContext,
    online_module,
    trainable_params,
    unwrap_jepa,
)
from jepa_core.metrics.system_stats import SystemStats
from jepa_core.metrics.weights_health import GradientNoiseScale, flat_grad, grad_cosine_tensor

__all__ = ["Instrumentation", "MetricGroup", "GROUPS", "CADENCE_KEYS"]


@dataclass(frozen=True)
class MetricGroup:
    name: str
    cadence_key: str  # attribute of jepa_core.config.DiagnosticsConfig, from the registry
    compute: Callable[["Instrumentation", StepContext], Metrics]


# The measuring function of each step group of the registry; a group without one fails here, at import.
GROUPS: tuple[MetricGroup, ...] = tuple(MetricGroup(g.name, str(g.cadence_key), MEASURE[g.name])
                                        for g in registry.STEP_GROUPS)
CADENCE_KEYS: tuple[str, ...] = tuple(g.cadence_key for g in GROUPS)  # this hook's (evaluation's is the trainer's)
_WEIGHTS_HEALTH = registry.group("weights_health").cadence_key or ""  # gradients are snapshot around its steps


def _read_cadences(cadences: Any) -> dict[str, int]:
    """Cadence values from a DiagnosticsConfig (attributes) or a mapping; positive integers only."""
    values = {}
    for key in CADENCE_KEYS:
        value = cadences.get(key) if isinstance(cadences, Mapping) else getattr(cadences, key, None)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"diagnostics.{key} must be a positive integer, got {value!r}")
        values[key] = value
    return values


# ---------------------------------------------------------------------------------------------------------------


class Instrumentation:
    """Runs every diagnostic group that is due at a step and returns the flat metric dict for the stream.

    Under DDP every rank calls the same hooks at the same steps (cadences are deterministic), so every rank returns
    the same keys and the trainer can reduce them; diagnostics themselves run on the rank's local batch.
    """

    def __init__(self, model: Any, cadences: Any, total_steps: int, device: torch.device | str,
                 world_size: int = 1, max_tokens: int = 4096, step_time_decay: float = 0.9) -> None:
        if total_steps < 1:
            raise ValueError(f"Instrumentation: total_steps must be positive, got {total_steps}")
        self.model = model
        self.total_steps = total_steps
        self.device = torch.device(device)
        self.world_size = world_size
        self.max_tokens = max_tokens
        self._cadences = _read_cadences(cadences)
        self._pending: dict[str, int] | None = None
        self._current_step: int | None = None
        # Initial context-encoder weights on CPU, for the relative drift (keys as in context_encoder.state_dict()).
        self.init_state: dict[str, Tensor] = {
            n: p.detach().to("cpu", copy=True) for n, p in unwrap_jepa(model).context_encoder.named_parameters()
        }
        self.gns = GradientNoiseScale()
        self.system_stats = SystemStats()  # this process's CPU and memory, measured since the previous reading
        self._step_time_decay = step_time_decay
        self._step_time_ema = 0.0
        self._step_time_updates = 0
        self._prev_grad: tuple[int, Tensor] | None = None
        self._grad_cosine: tuple[int, Tensor] | None = None
        self._params_before: tuple[int, list[Tensor]] | None = None
        self._probe_images: Tensor | None = None  # fixed probe batch, made on first use
        self.probe_shape: tuple[int, int, int] | None = None  # its (C, H, W) when the encoder does not say it
        self.failures: list[tuple[int, str, str]] = []  # groups that raised at the last after_step

    # ----------------------------------------------------------------------------------------------- cadences
    @property
    def cadences(self) -> dict[str, int]:
        """The cadences in force for the current step (a pending change shows from the next step)."""
        return dict(self._cadences)

    def set_cadences(self, cadences: Any) -> None:
        """Validate now; apply from the next step (the step in progress keeps the cadences it started with)."""
        self._pending = _read_cadences(cadences)

    def _begin(self, step: int) -> None:
        if step != self._current_step:
            self._current_step = step
            if self._pending is not None:
                self._cadences, self._pending = self._pending, None

    def _due(self, key: str, step: int) -> bool:
        return step % self._cadences[key] == 0

    def due_groups(self, step: int) -> list[str]:
        """Names of the groups that run at ``step`` with the cadences in force."""
        return [g.name for g in GROUPS if self._due(g.cadence_key, step)]

    # ------------------------------------------------------------------------------------------------ hooks
    def start_metrics(self) -> dict[str, float]:
        """Run facts, once at step 0: parameter counts."""
        return {k: float(v) for k, v in param_counts(unwrap_jepa(self.model)).items()}

    def wants_target_tokens(self, step: int) -> bool:
        """True when a group due at ``step`` reads the target encoder's tokens of every patch."""
        self._begin(step)
        return any(name in TARGET_TOKEN_GROUPS for name in self.due_groups(step))

    def wants_grads(self, step: int) -> bool:
        """True when ``after_backward`` must run at ``step``: weights health is due now (gradient, update ratio)
        or at the next step (the gradient cosine needs this step's gradient as its 'previous')."""
        self._begin(step)
        key = _WEIGHTS_HEALTH
        return self._due(key, step) or self._due(key, step + 1)

    def wants_micro_grads(self, step: int) -> bool:
        """True when the trainer should split the batch and report micro-batch |g|^2 (noise scale) at ``step``."""
        self._begin(step)
        return self._due(_WEIGHTS_HEALTH, step)

    @torch.no_grad()
    def after_backward(self, step: int, model: Any) -> None:
        """Snapshot gradients (and, at a due step, the parameters before the optimiser moves them)."""
        self._begin(step)
        key = _WEIGHTS_HEALTH
        params = trainable_params(online_module(model))
        grad = flat_grad(params)
        if self._due(key, step):
            prev = self._prev_grad
            if grad is not None and prev is not None and prev[0] == step - 1 and prev[1].shape == grad.shape:
                self._grad_cosine = (step, grad_cosine_tensor(prev[1], grad))
            self._params_before = (step, [p.detach().clone() for p in params])
        self._prev_grad = (step, grad) if grad is not None and self._due(key, step + 1) else None

    def after_step(self, out: Any, model: Any, step_seconds: float, data_seconds: float | None,
                   every_group: bool = False) -> dict[str, float]:
        """Every metric due at ``out.step`` as Python floats ({} when nothing is due); at most one sync per device.

        ``every_group`` runs all groups whatever their cadence (the trainer asks for it at the step a run diverges,
        so the stream describes the failure completely). A group that raises is left out of the row and recorded
        in ``failures`` as (step, group, reason): a diagnostic never ends a run."""
        step = int(out.step)
        self._begin(step)
        self._update_step_time(step_seconds)
        due = [g for g in GROUPS if every_group or self._due(g.cadence_key, step)]
        self.failures = []
        if not due:
            return {}
        ctx = StepContext(out, model, step_seconds, data_seconds, self.max_tokens)
        gathered: Metrics = {}
        for group in due:
            try:
                gathered.update(group.compute(self, ctx))
            except (RuntimeError, ValueError, ArithmeticError) as exc:  # LinAlgError is a RuntimeError
                self.failures.append((step, group.name, f"{type(exc).__name__}: {exc}"))
        metrics = to_floats(gathered)
        big_sq_norm = metrics.pop(GNS_BIG_KEY, None)
        if big_sq_norm is not None:
            gns = self.gns.update(list(out.micro_grad_sq_norms), int(out.micro_batch_size), big_sq_norm,
                                  int(out.batch_size))
            if gns is not None:
                metrics["health/gns"] = gns
        # Snapshots are single-use: drop them so they never pair with a later step or hold memory.
        self._grad_cosine = None
        if self._params_before is not None and self._params_before[0] <= step:
            self._params_before = None
        return metrics

    def _update_step_time(self, seconds: float) -> None:
        d = self._step_time_decay
        self._step_time_ema = d * self._step_time_ema + (1.0 - d) * max(seconds, 0.0)
        self._step_time_updates += 1

    @property
    def smoothed_step_seconds(self) -> float:
        """Debiased EMA of the step time (the ETA's rate)."""
        if self._step_time_updates == 0:
            return 0.0
        return self._step_time_ema / (1.0 - self._step_time_decay**self._step_time_updates)

    # ------------------------------------------------------------------------------------------ checkpointing
    def set_initial_weights(self, state: Mapping[str, Tensor]) -> None:
        """Initial context-encoder weights (``context_encoder.state_dict()`` at step 0), e.g. after a resume."""
        names = set(self.init_state)
        missing = sorted(names - set(state))
        if missing:
            raise ValueError(f"set_initial_weights: no entry for context-encoder parameter {missing[0]!r}")
        for name in names:
            if tuple(state[name].shape) != tuple(self.init_state[name].shape):
                raise ValueError(f"set_initial_weights: {name!r} has shape {tuple(state[name].shape)}, "
                                 f"expected {tuple(self.init_state[name].shape)}")
        self.init_state = {n: state[n].detach().to("cpu", copy=True) for n in names}

    def state_dict(self) -> dict[str, Any]:
        return {"gns": self.gns.state_dict(), "step_time_ema": self._step_time_ema,
                "step_time_updates": self._step_time_updates}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore from ``state_dict()``; an empty mapping (an older checkpoint) keeps the fresh state."""
        if "gns" in state:
            self.gns.load_state_dict(state["gns"])
        self._step_time_ema = float(state.get("step_time_ema", 0.0))
        self._step_time_updates = int(state.get("step_time_updates", 0))
