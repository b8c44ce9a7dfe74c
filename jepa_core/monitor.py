"""Watch a JEPA training loop we did not write: the diagnostics, the stream, the rules and the run directory of
`jepa train`, for any loop with a context encoder, a target encoder and a predictor.

    monitor = JEPAMonitor("runs/my-run", encoder, target_encoder, predictor, total_steps=N, input_shape=(3, 224, 224))
    with monitor:                                   # the run is `running`; an exception ends it `crashed`
        for step in range(1, N + 1):
            ...; loss.backward()
            monitor.after_backward(step)            # optional: grad norm, gradient cosine, update ratio
            optimizer.step(); ema_update(m)
            monitor.step(step, loss=loss, pred=z, target=h, target_tokens=h_all, context_masks=masks_enc,
                         target_masks=masks_pred, lr=lr, wd=wd, ema_momentum=m)

It writes what `jepa train` writes (config.toml with what it knows of the run, meta.json with the status, .lock,
metrics.jsonl with the same metric names and the rules' alerts as rows, TensorBoard), so the monitor notebook, the
report and `jepa doctor` read it unchanged. Metrics are measured by the trainer's own `Instrumentation`, at the same
cadences and with at most one host sync on a step where something is due (nothing otherwise); cadences follow
control.json, so the workbench's sliders steer this loop too. It never raises into the loop unless asked
(`raise_on_critical`). Under torchrun every rank calls it; rank 0 alone writes, with the trainer's reductions.
"""

from __future__ import annotations

import dataclasses
import signal
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from jepa_core.alerts.base import Alert
from jepa_core.alerts.clock import RunClock
from jepa_core.alerts.engine import RuleEngine
from jepa_core.common.atomic import atomic_write, write_json_atomic
from jepa_core.config import CADENCE_KEYS, Config, apply_overrides, config_to_dict, load_config
from jepa_core.config.files import toml_value
from jepa_core.method.probes import labelled_order, score_features
from jepa_core.method.schedules import LrSchedule
from jepa_core.metrics.instrument import Instrumentation
from jepa_core.metrics.sinks import JsonlSink, MetricLogger, TensorBoardSink, TrackioSink, WandbSink
from jepa_core.run import distributed
from jepa_core.run import status as words
from jepa_core.run.control import ControlWatcher
from jepa_core.run.rundir import RunPaths, create_run, read_meta, refuse_unwritable, set_status, start_meta

__all__ = ["JEPAMonitor", "CriticalAlert"]

CONTROL_SYNC_EVERY = 10  # under torchrun, rank 0 shares control-file changes this often (as the trainer does)
NOT_MEASURED = {
    "health/gns": "needs the loss of micro-batches, which only jepa train's step computes",
    "target/lidar": "needs the encoder to take context masks, which a loop's own encoder may not",
}
# What the config.toml of a monitored run holds: what the monitor knows. Read back, the rest is the tiny preset's,
# and the rules (live here and in `jepa doctor`) read only these.
KNOWN_KEYS = {
    "model": ("embed_dim",),
    "optim": ("steps", "batch_size", "lr", "start_lr", "final_lr", "warmup_steps", "weight_decay",
              "final_weight_decay"),
    "diagnostics": CADENCE_KEYS,
    "eval": ("knn_k", "probe_epochs", "at_start", "noise_splits", "lidar_images"),
    "logging": ("runs_dir", "name", "jsonl", "tensorboard"),
    "rules": tuple(f.name for f in dataclasses.fields(Config().rules)),
}


class CriticalAlert(RuntimeError):
    """Raised into the loop by `JEPAMonitor.step` on a critical alert, only with `raise_on_critical=True`."""

    def __init__(self, alert: Alert) -> None:
        super().__init__(f"[critical] step {alert.step} {alert.rule}: {alert.message}")
        self.alert = alert


@dataclass
class _Step:
    """One step as the trainer's `Instrumentation` reads it (the fields of jepa_core.method.step.StepOutput)."""

    step: int
    loss: Tensor | float
    grad_norm: Tensor | float | None
    lr: float
    wd: float
    ema_tau: float
    batch_size: int
    pred: Tensor
    target: Tensor
    target_tokens: Tensor
    context_idx: Tensor
    target_idx: Tensor
    micro_grad_sq_norms: tuple = ()
    micro_batch_size: int = 0


class _Parts(nn.Module):
    """The loop's three modules under the names the diagnostics read (views, no copies)."""

    def __init__(self, context_encoder: nn.Module, target_encoder: nn.Module, predictor: nn.Module) -> None:
        super().__init__()
        self.context_encoder, self.target_encoder, self.predictor = context_encoder, target_encoder, predictor


def _module(model: nn.Module | None, parts: Mapping[str, str], name: str, given: nn.Module | None) -> nn.Module:
    if given is not None:
        return given
    if model is None or name not in parts:
        raise TypeError(f"JEPAMonitor needs the {name}: pass it, or model= and parts={{'{name}': 'attribute'}}")
    module = model
    for attr in parts[name].split("."):
        module = getattr(module, attr)
    return module


def _context_index(masks: Tensor | Sequence[Tensor]) -> Tensor:
    """[B, Nc]: the (first) context mask, from a tensor or I-JEPA's list of index tensors."""
    return masks if isinstance(masks, Tensor) else masks[0]


def _target_index(masks: Tensor | Sequence[Tensor]) -> Tensor:
    """[B, K, Nt]: every target block, from [B, Nt], [B, K, Nt] or a list of K [B, Nt] index tensors."""
    if isinstance(masks, Tensor):
        return masks if masks.dim() == 3 else masks.unsqueeze(1)
    return torch.stack(list(masks), dim=1)


class JEPAMonitor:
    """The run directory, diagnostics and rules of `jepa train` around a loop written elsewhere (module docstring).

    `run_dir` must not exist yet. `input_shape` is the encoders' (C, H, W): a fixed batch of that shape is what the
    target/online statistics the collapse rules read are measured on. `optim` says what the monitor cannot see of
    the schedule (lr, start_lr, final_lr, warmup_steps, weight_decay, final_weight_decay, batch_size: the rules
    judge parameter-distance growth against the lr schedule); `diagnostics` sets cadences (`*_every_steps`);
    `eval_data` is held-out (images, labels) tensors or an iterable of such batches for the kNN and linear probe.
    `wandb` / `trackio` name a project to mirror the rows to (their packages installed), as `jepa train` does.
    """

    def __init__(self, run_dir: str | Path, context_encoder: nn.Module | None = None,
                 target_encoder: nn.Module | None = None, predictor: nn.Module | None = None, *,
                 total_steps: int, input_shape: Sequence[int], model: nn.Module | None = None,
                 parts: Mapping[str, str] = (), optim: Mapping[str, float] = (),
                 diagnostics: Mapping[str, int] = (), eval_data: Any = None, eval_at_start: bool = True,
                 rules: Mapping[str, Any] = (), tensorboard: bool = True, wandb: str | None = None,
                 trackio: str | None = None, raise_on_critical: bool = False, quiet: bool = False,
                 enabled: bool = True) -> None:
        # how the run ended (once it has), its last step, and whether control.json asked it to stop (`should_stop`)
        self.enabled, self.status, self.last_step, self.stop_requested = enabled, None, 0, False
        if not enabled:  # every method is a no-op: a flag turns the watching off without editing the loop
            return
        parts = dict(parts)
        self.parts = _Parts(_module(model, parts, "context_encoder", context_encoder),
                            _module(model, parts, "target_encoder", target_encoder),
                            _module(model, parts, "predictor", predictor))
        self.dist = distributed.context()
        weights = list(self.parts.target_encoder.parameters())
        if not weights:
            raise ValueError("JEPAMonitor: the target encoder has no parameters (is it the module you train?)")
        self.device = weights[0].device
        self.input_shape = tuple(int(v) for v in input_shape)
        embed_dim, self.num_patches = self._probe_shapes()
        self.eval_data, self.raise_on_critical, self.quiet = eval_data, raise_on_critical, quiet
        cfg = self._config(Path(run_dir), total_steps, embed_dim, optim, diagnostics, eval_at_start, rules,
                           tensorboard)
        self.instrumentation = Instrumentation(self.parts, cfg.diagnostics, total_steps, self.device,
                                               self.dist.world_size)
        self.instrumentation.probe_shape = self.input_shape
        self.paths: RunPaths | None = None
        self.cfg = cfg
        self.grad_hook_called = False
        self._grad_norm: tuple[int, Tensor] | None = None
        self._last_time: float | None = None
        self._old_sigterm: Any = None
        if self.dist.is_main:
            refuse_unwritable(Path(run_dir).parent, "run directory's folder")
            self.paths, self._lock = create_run(cfg, Path(run_dir).name)
            self._write_known_config(cfg)
            self.cfg = cfg = load_config(self.paths.config)  # what `jepa doctor` will read: the rules agree
            start_meta(self.paths, cfg, self.device, self.dist.world_size, attempt=1)
            self._update_meta(writer="jepa_core.monitor", script=sys.argv[0], input_shape=list(self.input_shape),
                              not_measured=dict(NOT_MEASURED))
            sinks: list[Any] = [JsonlSink(self.paths.metrics, attempt=1)]
            if tensorboard:
                sinks.append(TensorBoardSink(self.paths.tensorboard))
            for sink, project in ((WandbSink, wandb), (TrackioSink, trackio)):  # mirrors, as in `jepa train`
                if project:
                    sinks.append(sink(project=project, name=self.paths.root.name, config=config_to_dict(cfg)))
            self.logger = MetricLogger(sinks, rank=0)
            self.rules = RuleEngine(cfg.rules, feature_dim=cfg.model.embed_dim, lr_schedule=LrSchedule.of(cfg.optim),
                                    clock=RunClock.of(cfg))
            self.control: ControlWatcher | None = ControlWatcher(self.paths.root)
        else:
            self.logger, self.rules, self.control = MetricLogger([], rank=self.dist.rank), None, None
        self._started = False

    # ------------------------------------------------------------------------------------------------- setup
    @torch.no_grad()
    def _probe_shapes(self) -> tuple[int, int]:
        """(feature width, patches per image) from one forward of the target encoder on a blank input."""
        encoder, was_training = self.parts.target_encoder, self.parts.target_encoder.training
        encoder.eval()
        try:
            tokens = encoder(torch.zeros(1, *self.input_shape, device=self.device))
        finally:
            encoder.train(was_training)
        if tokens.dim() != 3:
            raise ValueError(f"JEPAMonitor: the target encoder must return tokens [B, N, D]; it returned shape "
                             f"{tuple(tokens.shape)} for input_shape {self.input_shape}")
        return int(tokens.shape[-1]), int(tokens.shape[1])

    def _config(self, run_dir: Path, total_steps: int, embed_dim: int, optim: Mapping[str, float],
                diagnostics: Mapping[str, int], eval_at_start: bool, rules: Mapping[str, Any],
                tensorboard: bool) -> Config:
        """The run's config as far as the monitor knows it; an unknown schedule is read as a constant lr."""
        optim = {"lr": 1.0, "start_lr": 1.0, "final_lr": 1.0, "warmup_steps": 0, **dict(optim)}
        sets = [f"optim.steps={int(total_steps)}", f"model.embed_dim={embed_dim}", "eval.lidar_images=0",
                f"eval.at_start={'true' if eval_at_start else 'false'}", f"logging.tensorboard={str(tensorboard).lower()}",
                f"logging.runs_dir={toml_value(str(run_dir.parent))}", f"logging.name={toml_value(run_dir.name)}"]
        sets += [f"optim.{k}={toml_value(v)}" for k, v in optim.items()]
        sets += [f"diagnostics.{k}={toml_value(v)}" for k, v in dict(diagnostics).items()]
        sets += [f"rules.{k}={toml_value(v)}" for k, v in dict(rules).items()]
        return apply_overrides(Config(), sets)

    def _write_known_config(self, cfg: Config) -> None:
        lines = ["# Written by jepa_core.monitor: what it knows of a run trained by another loop. Keys not here",
                 "# read as the tiny preset's when the run is loaded; they describe nothing of this run.", ""]
        for section, values in config_to_dict(cfg).items():
            keys = KNOWN_KEYS.get(section, ())
            if keys:
                lines.append(f"[{section}]")
                lines += [f"{k} = {toml_value(values[k])}" for k in keys if k in values]
                lines.append("")
        atomic_write(self.paths.config, "\n".join(lines).encode("utf-8"))

    def _update_meta(self, **fields: Any) -> None:
        meta = read_meta(self.paths.root)
        meta.update(fields)
        write_json_atomic(self.paths.meta, meta)

    # ---------------------------------------------------------------------------------------------- lifecycle
    def __enter__(self) -> JEPAMonitor:
        if not self.enabled:
            return self
        self.start()
        if self.dist.is_main and threading.current_thread() is threading.main_thread() \
                and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            # A scheduler's SIGTERM ends the loop as Ctrl-C would: the run is marked stopped, not left running.
            self._old_sigterm = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        if not self.enabled:
            return False
        if self._old_sigterm is not None:
            signal.signal(signal.SIGTERM, self._old_sigterm)
            self._old_sigterm = None
        if kind is None:
            self.close()
        else:
            self.close(words.STOPPED if issubclass(kind, (KeyboardInterrupt, SystemExit)) else words.CRASHED)
        return False  # the loop's exception goes on

    def start(self) -> None:
        """The step-0 row (parameter counts) and, with eval data and eval_at_start, the random-init evaluation."""
        if not self.enabled or self._started:
            return
        self._started = True
        self._emit(0, self.instrumentation.start_metrics(), reduce=False)
        if self.eval_data is not None and self.cfg.eval.at_start:
            self.evaluate(0)
        self._last_time = time.perf_counter()

    def close(self, status: str | None = None) -> str:
        """End the run: `finished` when it reached total_steps, else `stopped` (or the status given); returns it."""
        if not self.enabled:
            return status or words.STOPPED
        if self.status is not None:
            return self.status
        self.status = status = status or (words.FINISHED if self.last_step >= self.cfg.optim.steps else words.STOPPED)
        if self.dist.is_main:
            if not self.grad_hook_called:
                self._update_meta(not_measured={**NOT_MEASURED, "grad_norm, health/grad_cosine_prev, "
                                                "health/update_ratio": "after_backward() was never called"})
            try:
                set_status(self.paths, status, self.last_step)
            finally:
                self.logger.close()
                self._lock.release()
        return status

    @property
    def should_stop(self) -> bool:
        """True once control.json (the workbench's Stop) asked the run to stop; the loop decides what to do."""
        return self.stop_requested

    # -------------------------------------------------------------------------------------------------- steps
    @torch.no_grad()
    def after_backward(self, step: int) -> None:
        """Call after `loss.backward()` and before the optimizer step (gradients unscaled, before clipping): the
        gradient norm (logged as grad_norm) and the gradient diagnostics, on the steps they are due only."""
        if not self.enabled:
            return
        self.grad_hook_called = True
        online = [p for m in (self.parts.context_encoder, self.parts.predictor) for p in m.parameters()
                  if p.grad is not None]
        if step % self.instrumentation.cadences["basic_every_steps"] == 0 and online:
            self._grad_norm = (step, torch.linalg.vector_norm(torch.stack(torch._foreach_norm([p.grad for p in online]))))
        if self.instrumentation.wants_grads(step):
            self.instrumentation.after_backward(step, self.parts)

    def step(self, step: int, *, loss: Tensor | float, pred: Tensor, target: Tensor,
             context_masks: Tensor | Sequence[Tensor], target_masks: Tensor | Sequence[Tensor], lr: float,
             wd: float = 0.0, ema_momentum: float = 1.0, target_tokens: Tensor | None = None,
             batch_size: int | None = None) -> dict[str, float]:
        """Call once per step after the optimizer step and the EMA update; `step` counts updates (1 after the first).
        `pred` and `target` are the predictor's output and the (normalised) target features at the masked positions,
        `target_tokens` the target encoder's (normalised) output for every patch. Returns the metrics logged for it
        ({} when nothing was due)."""
        if not self.enabled:
            return {}
        self.start()
        now = time.perf_counter()
        seconds, self._last_time = now - (self._last_time or now), now
        context_idx = _context_index(context_masks)
        grad_norm = self._grad_norm[1] if self._grad_norm is not None and self._grad_norm[0] == step else None
        record = _Step(step=int(step), loss=loss.detach() if isinstance(loss, Tensor) else float(loss),
                       grad_norm=grad_norm, lr=float(lr), wd=float(wd), ema_tau=float(ema_momentum),
                       batch_size=int(batch_size or context_idx.shape[0] * self.dist.world_size), pred=pred.detach(),
                       target=target.detach(), target_tokens=(target if target_tokens is None else target_tokens).detach(),
                       context_idx=context_idx, target_idx=_target_index(target_masks))
        metrics = self.instrumentation.after_step(record, self.parts, seconds, None)
        for failed_step, group, reason in self.instrumentation.failures:
            self.logger.log(failed_step, {}, event="diagnostic_error", group=group, message=reason)
        self.last_step = int(step)
        self._emit(int(step), metrics)
        if self.eval_data is not None and (step % self.cfg.diagnostics.eval_every_steps == 0
                                           or step == self.cfg.optim.steps):
            self.evaluate(int(step))
        self._poll_control(int(step))
        return metrics

    def _emit(self, step: int, metrics: dict[str, float], reduce: bool = True) -> None:
        if not metrics:
            return
        if reduce:  # every rank calls step() at the same steps, so every rank reaches this with the same keys
            metrics = distributed.reduce_metrics(metrics, self.dist)
        if not self.dist.is_main:
            return
        self.logger.log(step, metrics)
        for alert in self.rules.update({"step": step, **metrics}):
            self.logger.alert(alert.step, alert.rule, alert.severity, alert.metric, alert.value, alert.message)
            if not self.quiet:
                print(f"[{alert.severity}] step {alert.step} {alert.rule}: {alert.message}", file=sys.stderr)
            if alert.severity == "critical" and self.raise_on_critical:
                raise CriticalAlert(alert)

    def _poll_control(self, step: int) -> None:
        """control.json's cadences from the next step, and its stop flag as `should_stop` (the same on every rank)."""
        if self.dist.enabled:
            if step % CONTROL_SYNC_EVERY:
                return
            changes = distributed.broadcast_object(self.control.poll() if self.control else None, self.dist)
        else:
            changes = self.control.poll() if self.control else None
        if not changes:
            return
        cadences = {k: v for k, v in changes.items() if k in CADENCE_KEYS}
        if cadences:
            for key, value in cadences.items():
                setattr(self.cfg.diagnostics, key, value)
            self.instrumentation.set_cadences(self.cfg.diagnostics)
            self.logger.log(step, {}, event="cadence", **cadences)
        if changes.get("stop"):
            self.stop_requested = True

    # --------------------------------------------------------------------------------------------- evaluation
    @torch.no_grad()
    def evaluate(self, step: int) -> dict[str, float]:
        """kNN and linear probe of the target encoder's mean-pooled features on `eval_data` (rank 0; at step 0 also
        the noise of one evaluation); logged at `step` and judged by the rules."""
        if not self.enabled or not self.dist.is_main or self.eval_data is None:
            return {}
        features, labels = self._heldout_features()
        order = labelled_order(labels, seed=0)
        if order is None:
            return {}
        e = self.cfg.eval
        metrics = score_features(features[order], labels[order], knn_k=e.knn_k, probe_epochs=e.probe_epochs,
                                 noise_splits=e.noise_splits if step == 0 else 0)
        self._emit(step, metrics, reduce=False)
        return metrics

    def _heldout_features(self) -> tuple[Tensor, Tensor]:
        data = self.eval_data
        batches: Iterable = [data] if isinstance(data, (tuple, list)) and isinstance(data[0], Tensor) else data
        encoder, was_training = self.parts.target_encoder, self.parts.target_encoder.training
        encoder.eval()
        features, labels = [], []
        try:
            for images, batch_labels in batches:
                for chunk in torch.split(images, 256):
                    features.append(encoder(chunk.to(self.device)).float().mean(dim=1).cpu())
                labels.append(torch.as_tensor(batch_labels).cpu())
        finally:
            encoder.train(was_training)
        return torch.cat(features), torch.cat(labels).long()


def _raise_keyboard_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")
