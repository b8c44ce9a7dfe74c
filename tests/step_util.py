"""Step hooks for tests that drive `train_step` by hand with the instrumentation, as the trainer's hooks do."""

from __future__ import annotations

from torch import nn

from jepa_core.method.noise_scale import backward_for
from jepa_core.method.runtime import PhaseTimer
from jepa_core.method.step import StepHooks
from jepa_core.metrics.instrument import Instrumentation


class InstrumentedHooks(StepHooks):
    """At update `step`: the gradient read before clipping when weights health wants it, the noise-scale backward
    at its cadence (2 micro-batches), the target's tokens of every patch where a group reads them and, when given,
    a phase timer."""

    def __init__(self, inst: Instrumentation, step: int, model: nn.Module, online: nn.Module,
                 timer: PhaseTimer | None = None) -> None:
        self.wants_grads = inst.wants_grads(step)
        super().__init__(backward=backward_for(inst.wants_micro_grads(step), 2, online, distributed=False),
                         whole_target=inst.wants_target_tokens(step))
        self.inst, self.step, self.model, self.timer = inst, step, model, timer

    def after_backward(self) -> None:
        self.mark("forward_backward")
        if self.wants_grads:
            self.inst.after_backward(self.step, self.model)

    def mark(self, phase: str) -> None:
        if self.timer is not None:
            self.timer.mark(phase)
