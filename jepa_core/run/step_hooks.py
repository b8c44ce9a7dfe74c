"""What the trainer adds around `train_step`, behind one object, so that `Trainer.step_once` reads as the method.

At the step's fixed points (`StepHooks`): the phase timer (at the logging cadence only: CUDA events cost nothing,
but reading them waits), the gradient snapshot before clipping (when weights health is due), the noise-scale
backward at its cadence and design §8's faults of this step. Around the step: the profiler's step window and named
regions, the batch's move to the device, the mask overlay the notebook reads (`last_batch`), unreadable images
counted and named, and the diagnostics due after the update with their phase times and the compile warm-up's
correction of the ETA.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Callable

import torch

from jepa_core.config import Config
from jepa_core.data import Batch, epoch_of_step, normalize_images
from jepa_core.method.faults import step_faults
from jepa_core.method.masks import MaskBatch
from jepa_core.method.noise_scale import backward_for
from jepa_core.method.runtime import CompileWarmup, PhaseTimer, StepProfiler, phase_metrics
from jepa_core.method.step import StepHooks, StepOutput, TrainState
from jepa_core.metrics.instrument import Instrumentation

SKIP_WARNINGS = 20  # unreadable images named one by one on stderr; after that only counted (data/skipped_images)


class TrainerHooks(StepHooks):
    def __init__(self, cfg: Config, state: TrainState, instrumentation: Instrumentation, device: torch.device,
                 distributed: bool, train_size: int, streamed: bool, say: Callable[[str], None] | None) -> None:
        super().__init__()
        self.cfg, self.state, self.instrumentation, self.device = cfg, state, instrumentation, device
        self.distributed, self.train_size, self.streamed = distributed, train_size, streamed
        self.say = say  # where unreadable images are named (rank 0), or None
        self.compile_warmup = CompileWarmup(cfg.runtime.compile, cfg.optim.steps)
        self.profiler: StepProfiler | None = None  # set by the trainer for --profile-steps
        self.skipped_images = 0  # unreadable images replaced in the batches trained on so far (this rank)
        # (uint8 images, masks) of the last batch, replaced as one tuple so that a reader on another thread (the
        # notebook's mask overlay) never pairs one step's images with another step's masks.
        self.last_batch: tuple[torch.Tensor, MaskBatch] | None = None
        self.step = 0  # the update under way, counted from 1
        self.timer: PhaseTimer | None = None
        self.wants_grads = False
        self._images: torch.Tensor | None = None  # this update's normalised images
        self._started = self._data_seconds = 0.0
        self._warmup: tuple[int, dict] | None = None

    def begin(self, step: int) -> TrainerHooks:
        """Update `step` begins: what is due at it is decided here, once."""
        self._started = time.perf_counter()
        self.step = step
        if self.profiler is not None:
            self.profiler.step_begins(step)
        inst = self.instrumentation
        self.wants_grads = inst.wants_grads(step)
        self.whole_target = inst.wants_target_tokens(step)
        self.faults = step_faults(self.cfg.faults, step - 1)
        self.backward = backward_for(inst.wants_micro_grads(step), self.cfg.optim.gns_microbatches,
                                     self.state.online, self.distributed)
        return self

    def fetch(self, feed) -> tuple[torch.Tensor, MaskBatch]:
        """This update's batch on the device: the wait for it and its (asynchronous) copy are the 'data' phase."""
        with self.region("data"):
            batch: Batch = feed.get(self.step - 1)
            self.last_batch = (batch.images, batch.masks)
            images = self._images = normalize_images(batch.images.to(self.device, non_blocking=True))
            masks = MaskBatch(batch.masks.context_idx.to(self.device, non_blocking=True),
                              batch.masks.target_idx.to(self.device, non_blocking=True))
        if batch.skipped:
            self._count_skipped(batch)
        self._data_seconds = time.perf_counter() - self._started
        every = self.instrumentation.cadences["basic_every_steps"]
        self.timer = PhaseTimer(self.device) if self.step % every == 0 else None  # from here: the step's phases
        self._warmup = self.compile_warmup.before(self.instrumentation)
        return images, masks

    # ------------------------------------------------------------------------- the step's own fixed points
    def after_backward(self) -> None:
        if self.timer is not None:
            self.timer.mark("forward_backward")
        if self.wants_grads:
            self.instrumentation.after_backward(self.step, self.state.model)
            if self.timer is not None:
                self.timer.mark("diagnostics")

    def mark(self, phase: str) -> None:
        if self.timer is not None:
            self.timer.mark(phase)

    # ---------------------------------------------------------------------------------------- after it
    def measure(self, out: StepOutput) -> dict[str, float]:
        """The diagnostics due at this update (every group when it was refused), with the row's phase times, epoch
        and skipped-image count."""
        t_diag = time.perf_counter()
        if not out.finite and out.target_tokens is None:
            # Every group reads a refused update, which moved no weight: the target's tokens as the step saw them.
            with torch.no_grad(), self.state.autocast():
                out = dataclasses.replace(out, target_tokens=self.state.model.target_encoder(self._images))
        with self.region("diagnostics"):
            metrics = self.instrumentation.after_step(out, self.state.model, t_diag - self._started,
                                                      self._data_seconds, every_group=not out.finite)
        t_diag = time.perf_counter() - t_diag
        self.compile_warmup.after(self._warmup, self.instrumentation, self.step, metrics)
        if metrics and "loss" in metrics:
            metrics["epoch"] = epoch_of_step(self.train_size, self.cfg.optim.batch_size, self.step)
            metrics.update(phase_metrics(self.timer, t_diag))
            if self.streamed:
                metrics["data/skipped_images"] = float(self.skipped_images)
        return metrics

    def end(self) -> None:
        if self.profiler is not None:
            self.profiler.step_ends(self.step)

    def region(self, name: str) -> contextlib.AbstractContextManager:
        """A named range in the profiler's trace while it records; nothing otherwise."""
        return self.profiler.region(name) if self.profiler is not None else contextlib.nullcontext()

    def _count_skipped(self, batch: Batch) -> None:
        """An unreadable image never ends a run: it was replaced in the batch; here it is counted and named."""
        for what, why in batch.skipped:
            self.skipped_images += 1
            if self.say is not None and self.skipped_images <= SKIP_WARNINGS:
                more = " (further ones are only counted, in data/skipped_images)" \
                    if self.skipped_images == SKIP_WARNINGS else ""
                self.say(f"warning: step {batch.step + 1}: skipped unreadable image {what}: {why}; "
                         f"{self.skipped_images} skipped so far{more}")
