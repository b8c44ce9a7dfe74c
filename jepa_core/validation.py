"""Validation of a run config: every bad value raises ConfigError naming its key, before any work starts."""

from __future__ import annotations

from jepa_core.config import CADENCE_KEYS, Config, ConfigError
from jepa_core.masks import MaskConfigError, check_mask_config


def _positive(key: str, value: float) -> None:
    if value <= 0:
        raise ConfigError(f"{key} must be positive, got {value!r}")


def _range_pair(key: str, pair: list[float], lo: float, hi: float, hi_inclusive: bool = False) -> None:
    a, b = pair
    if a > b:
        raise ConfigError(f"{key}: min {a} is greater than max {b}")
    for v in pair:
        ok = lo < v < hi or (hi_inclusive and v == hi)
        if not ok:
            bound = "]" if hi_inclusive else ")"
            raise ConfigError(f"{key}: {v} is outside ({lo}, {hi}{bound}")


def validate_config(cfg: Config) -> Config:
    m, d, k, o = cfg.model, cfg.data, cfg.masks, cfg.optim
    for name in ("img_size", "patch_size", "in_chans", "embed_dim", "depth", "num_heads", "pred_dim",
                 "pred_depth", "pred_num_heads"):
        _positive(f"model.{name}", getattr(m, name))
    _positive("model.mlp_ratio", m.mlp_ratio)
    if m.img_size % m.patch_size:
        raise ConfigError(f"model.img_size {m.img_size} is not divisible by model.patch_size {m.patch_size}")
    if m.embed_dim % m.num_heads:
        raise ConfigError(f"model.embed_dim {m.embed_dim} is not divisible by model.num_heads {m.num_heads}")
    if m.pred_dim % m.pred_num_heads:
        raise ConfigError(f"model.pred_dim {m.pred_dim} is not divisible by model.pred_num_heads {m.pred_num_heads}")
    if m.embed_dim % 4:
        raise ConfigError(f"model.embed_dim {m.embed_dim} must be a multiple of 4 (2-D sin-cos positions)")
    if m.pred_dim % 4:
        raise ConfigError(f"model.pred_dim {m.pred_dim} must be a multiple of 4 (2-D sin-cos positions)")

    if d.dataset not in ("shapes", "folder", "npz"):
        raise ConfigError(f"data.dataset: unknown dataset {d.dataset!r}; choose shapes, folder or npz")
    if d.dataset != "shapes" and not d.path:
        raise ConfigError(f"data.path is required when data.dataset = {d.dataset!r}")
    for name in ("num_classes", "num_train", "num_heldout"):
        _positive(f"data.{name}", getattr(d, name))
    if not 0 < d.heldout_fraction < 1:
        raise ConfigError(f"data.heldout_fraction must be in (0, 1), got {d.heldout_fraction}")

    _range_pair("masks.target_scale", k.target_scale, 0.0, 1.0)
    _range_pair("masks.context_scale", k.context_scale, 0.0, 1.0, hi_inclusive=True)
    for key, pair in (("masks.target_aspect", k.target_aspect), ("masks.context_aspect", k.context_aspect)):
        if pair[0] > pair[1]:
            raise ConfigError(f"{key}: min {pair[0]} is greater than max {pair[1]}")
        if pair[0] <= 0:
            raise ConfigError(f"{key}: aspect ratios must be positive, got {pair[0]}")
    _positive("masks.num_targets", k.num_targets)
    _positive("masks.min_keep", k.min_keep)
    grid = m.img_size // m.patch_size
    try:
        check_mask_config(grid, grid, k.num_targets, tuple(k.target_scale), tuple(k.target_aspect),
                          tuple(k.context_scale), tuple(k.context_aspect), k.min_keep)
    except MaskConfigError as exc:
        raise ConfigError(f"{exc} (patch grid {grid}x{grid})") from exc

    for name in ("steps", "batch_size", "lr", "gns_microbatches"):
        _positive(f"optim.{name}", getattr(o, name))
    for name in ("start_lr", "final_lr", "weight_decay", "final_weight_decay", "grad_clip", "warmup_steps"):
        if getattr(o, name) < 0:
            raise ConfigError(f"optim.{name} must be >= 0, got {getattr(o, name)}")
    for name in ("beta1", "beta2"):
        if not 0 <= getattr(o, name) < 1:
            raise ConfigError(f"optim.{name} must be in [0, 1), got {getattr(o, name)}")
    if o.warmup_steps > o.steps:
        raise ConfigError(f"optim.warmup_steps {o.warmup_steps} exceeds optim.steps {o.steps}")
    if o.loss not in ("smooth_l1", "mse"):
        raise ConfigError(f"optim.loss: unknown loss {o.loss!r}; choose smooth_l1 or mse")
    if o.batch_size % o.gns_microbatches:
        raise ConfigError(f"optim.gns_microbatches {o.gns_microbatches} must divide optim.batch_size {o.batch_size}")

    for name in ("start", "end"):
        v = getattr(cfg.ema, name)
        if not 0 <= v <= 1:
            raise ConfigError(f"ema.{name} must be in [0, 1], got {v}")
    if cfg.ema.schedule not in ("linear", "cosine"):
        raise ConfigError(f"ema.schedule: unknown schedule {cfg.ema.schedule!r}; choose linear or cosine")

    for name in CADENCE_KEYS:
        v = getattr(cfg.diagnostics, name)
        if v <= 0:
            raise ConfigError(f"diagnostics.{name} must be a positive number of steps, got {v}")
    _positive("eval.knn_k", cfg.eval.knn_k)
    _positive("eval.probe_epochs", cfg.eval.probe_epochs)
    _positive("logging.log_every_steps", cfg.logging.log_every_steps)
    _positive("logging.checkpoint_every_steps", cfg.logging.checkpoint_every_steps)
    if not cfg.logging.runs_dir:
        raise ConfigError("logging.runs_dir must not be empty")
    if any(c in cfg.logging.name for c in "/\\") or cfg.logging.name in (".", ".."):
        raise ConfigError(f"logging.name {cfg.logging.name!r} must be a plain directory name")

    r = cfg.runtime
    if not (r.device in ("auto", "cpu", "cuda", "mps") or r.device.startswith("cuda:")):
        raise ConfigError(f"runtime.device: unknown device {r.device!r}; choose auto, cpu, cuda, cuda:N or mps")
    if r.precision not in ("auto", "fp32", "bf16"):
        raise ConfigError(f"runtime.precision: unknown precision {r.precision!r}; choose auto, fp32 or bf16")
    if r.num_threads < 0:
        raise ConfigError(f"runtime.num_threads must be >= 0, got {r.num_threads}")

    f = cfg.faults
    if f.start_step < 0:
        raise ConfigError(f"faults.start_step must be >= 0, got {f.start_step}")
    if not 0 <= f.mask_leak_fraction <= 1:
        raise ConfigError(f"faults.mask_leak_fraction must be in [0, 1], got {f.mask_leak_fraction}")
    _positive("faults.lr_blowup_factor", f.lr_blowup_factor)
    if f.collapse_weight < 0:
        raise ConfigError(f"faults.collapse_weight must be >= 0, got {f.collapse_weight}")
    if f.frozen_target and f.target_copies_online:
        raise ConfigError("faults.frozen_target and faults.target_copies_online cannot both be on")
    try:
        cfg.rules.validate()
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    return cfg
