"""The device side of training: which device, torch.compile, per-phase step timing and profiler traces.

Timing is cheap by construction: on CPU a phase is a perf_counter difference; on CUDA it is a pair of CUDA events
recorded on the stream (no host sync), read only at the logging cadence, after the step has synchronised anyway.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import torch
from torch import nn

from jepa_core.config import ConfigError

PHASES = ("forward_backward", "optimizer", "ema", "diagnostics")


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    if name == "auto":
        return torch.device(f"cuda:{local_rank}") if torch.cuda.is_available() else torch.device("cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"runtime.device = {name!r} but CUDA is not available on this machine")
    return torch.device(name)


def autocast_for(device: torch.device, precision: str) -> contextlib.AbstractContextManager:
    """bf16 autocast where runtime.precision asks for it ("auto": on CUDA only); nothing otherwise."""
    if (precision == "auto" and device.type == "cuda") or precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def compile_module(module: nn.Module) -> nn.Module:
    """A torch.compile'd wrapper sharing `module`'s parameters (state_dict keys of `module` are untouched, so
    checkpoints, diagnostics and evaluation keep using the plain module)."""
    return torch.compile(module)


def compiled_graph_count() -> int:
    """Graphs torch.compile has built in this process so far: a step that raises it was (re)compiling, and its
    time says nothing about the steady state (the trainer leaves it out of the ETA)."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:  # a torch build without dynamo: nothing is ever compiled
        return 0
    return int(counters["stats"]["unique_graphs"])


class CompileWarmup:
    """Under runtime.compile, a step that compiled (the first ones, a new batch shape such as the noise-scale
    micro-batches) takes seconds to minutes. Its time stays in time/step_seconds, which is true, but it is left out of
    the ETA's running average, which it would distort for hours."""

    def __init__(self, enabled: bool, total_steps: int) -> None:
        self.enabled, self.total_steps = enabled, total_steps

    def before(self, instrumentation) -> tuple[int, dict] | None:
        """The compiled-graph count and the ETA's step-time state before a step (None when compile is off)."""
        if not self.enabled:
            return None
        state = instrumentation.state_dict()
        return compiled_graph_count(), {k: state[k] for k in ("step_time_ema", "step_time_updates")}

    def after(self, before: tuple[int, dict] | None, instrumentation, step: int, metrics: dict) -> bool:
        """After the step: if it compiled, restore the step-time state and the row's ETA; True when it did."""
        if before is None or compiled_graph_count() == before[0]:
            return False
        instrumentation.load_state_dict(before[1])  # no "gns" key: the noise-scale state is left as it is
        if "time/eta_seconds" in metrics:
            metrics["time/eta_seconds"] = eta_seconds(step, self.total_steps, instrumentation.smoothed_step_seconds)
        return True


def phase_metrics(timer: PhaseTimer | None, diagnostics_seconds: float) -> dict[str, float]:
    """time/<phase>_seconds of one step: forward+backward, optimizer, EMA (from `timer`, when the step was timed) and
    diagnostics (the gradient snapshot inside the step plus the metric groups after it, `diagnostics_seconds`)."""
    phases = timer.seconds() if timer is not None else {}
    phases["diagnostics"] = phases.get("diagnostics", 0.0) + diagnostics_seconds
    return {f"time/{name}_seconds": phases[name] for name in PHASES if name in phases}


class PhaseTimer:
    """Seconds spent in each phase of one step, marked in order: `mark(name)` closes the span since the last mark."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self._spans: list[tuple[str, object, object]] = []
        self._last = self._now()

    def _now(self) -> object:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def mark(self, phase: str) -> None:
        now = self._now()
        self._spans.append((phase, self._last, now))
        self._last = now

    def seconds(self) -> dict[str, float]:
        """Per phase, summed; on CUDA this waits for the last marked event (call it after the step's own sync)."""
        totals: dict[str, float] = {}
        if self.cuda and self._spans:
            self._last.synchronize()
        for phase, start, end in self._spans:
            spent = start.elapsed_time(end) / 1000.0 if self.cuda else end - start
            totals[phase] = totals.get(phase, 0.0) + spent
        return totals


def parse_profile_steps(text: str) -> tuple[int, int]:
    """'A:B' -> (A, B): the logged steps (1-based, inclusive) to trace; ConfigError naming --profile-steps."""
    parts = text.split(":")
    try:
        first, last = (int(p) for p in parts) if len(parts) == 2 else (None, None)
    except ValueError:
        first = last = None
    if first is None or last is None or not 1 <= first <= last:
        raise ConfigError(f"--profile-steps {text!r}: expected A:B, two step numbers with 1 <= A <= B (e.g. 20:25)")
    return first, last


class StepProfiler:
    """A torch.profiler trace of logged steps first..last, written to `out_dir` as Chrome/Perfetto JSON.

    The window starts before step `first`'s batch is fetched, so the trace shows the data wait too; a run that
    stops inside the window still writes what it recorded (close)."""

    def __init__(self, first: int, last: int, out_dir: Path, device: torch.device) -> None:
        self.first, self.last, self.out_dir = first, last, out_dir
        self.activities = [torch.profiler.ProfilerActivity.CPU]
        if device.type == "cuda":
            self.activities.append(torch.profiler.ProfilerActivity.CUDA)
        self._profile: torch.profiler.profile | None = None
        self.path: Path | None = None

    @property
    def active(self) -> bool:
        return self._profile is not None

    def step_begins(self, step: int) -> None:
        if self._profile is None and self.path is None and self.first <= step <= self.last:
            self._profile = torch.profiler.profile(activities=self.activities, record_shapes=True)
            self._profile.__enter__()
            self._began = step

    def step_ends(self, step: int) -> None:
        if self._profile is not None and step >= self.last:
            self._finish(step)

    def close(self, step: int) -> None:
        if self._profile is not None:
            self._finish(step)

    def _finish(self, step: int) -> None:
        profile, self._profile = self._profile, None
        profile.__exit__(None, None, None)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.out_dir / f"steps_{self._began:07d}-{step:07d}.json"
        profile.export_chrome_trace(str(self.path))

    def region(self, name: str) -> contextlib.AbstractContextManager:
        """A named range in the trace while profiling; nothing otherwise."""
        return torch.profiler.record_function(name) if self._profile is not None else contextlib.nullcontext()


def eta_seconds(steps_done: int, total_steps: int, seconds_per_step: float) -> float:
    """Seconds left once ``steps_done`` of ``total_steps`` steps are finished, at ``seconds_per_step`` each.

    The trainer logs the row of its k-th update at step k (1-based), so its logged step is ``steps_done``.
    """
    return max(total_steps - steps_done, 0) * max(seconds_per_step, 0.0)


def set_thread_count(threads: int) -> None:
    """torch's intra-op thread count for the whole process; 0 keeps torch's default. Process-wide state: only a
    process's entry point (`jepa train`, `jepa check`, a notebook session starting a run) calls it, never the Trainer."""
    if threads:
        torch.set_num_threads(threads)
