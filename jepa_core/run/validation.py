"""Validation of a run config: every bad value raises ConfigError naming its key, before any work starts."""

from __future__ import annotations

import dataclasses
import math
import re
import zipfile
from pathlib import Path

import numpy as np

from jepa_core.config import CADENCE_KEYS, Config, ConfigError, ModelConfig
from jepa_core.config.rules import split_names
from jepa_core.data import DataError, heldout_count, list_image_folder
from jepa_core.method.masks import MaskConfigError, check_mask_config
from jepa_core.method.probes import MIN_LABELLED_IMAGES
from jepa_core.metrics import registry
from jepa_core.run.evaluation import RETRIEVAL_K, RETRIEVAL_QUERIES

# A run name becomes a directory name, a path in messages and a title in reports: a portable file-name character
# set, no leading "." (hidden, "..") or "-" (read as an option by shell tools), short enough for any file system.
RUN_NAME_MAX_CHARS = 100
_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


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


def _check_values(cfg: Config) -> None:
    """Every float (and list entry) must be finite: `v <= 0` and `lo < v < hi` are False for NaN, so a NaN would
    slip through every range check below, and an infinity passes the one-sided ones. Every string must be
    Unicode text that config.toml can hold (a lone surrogate is what undecodable command-line bytes become)."""
    for section in dataclasses.fields(cfg):
        values = getattr(cfg, section.name)
        for f in dataclasses.fields(values):
            value = getattr(values, f.name)
            for v in value if isinstance(value, list) else [value]:
                if isinstance(v, float) and not math.isfinite(v):
                    raise ConfigError(f"{section.name}.{f.name} must be a finite number, got {value!r}")
                if isinstance(v, str) and not _is_utf8(v):
                    raise ConfigError(f"{section.name}.{f.name} {v!r} is not valid Unicode text")


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_run_name(key: str, name: str) -> None:
    """Raise ConfigError naming `key` unless `name` is empty (a timestamped name) or a safe directory name."""
    if not name:
        return
    if len(name) > RUN_NAME_MAX_CHARS or not _RUN_NAME.fullmatch(name):
        shown = name if len(name) <= 40 else name[:40] + "..."
        raise ConfigError(
            f"{key} {shown!r} ({len(name)} characters) is not a usable run name: use at most {RUN_NAME_MAX_CHARS} "
            "ASCII letters, digits, '.', '_' and '-', not starting with '.' or '-' (no spaces, slashes or "
            "control characters)")


def _check_mlp_width(m: ModelConfig) -> None:
    # method/model.py builds every block's MLP with int(dim * mlp_ratio) hidden units, in the encoders (embed_dim) and
    # in the predictor (pred_dim); a zero width builds an empty Linear that trains nothing.
    for dim_key in ("embed_dim", "pred_dim"):
        dim = getattr(m, dim_key)
        width = int(dim * m.mlp_ratio)
        if width < 1:
            raise ConfigError(f"model.mlp_ratio {m.mlp_ratio} gives an MLP hidden width of int({dim} * "
                              f"{m.mlp_ratio}) = {width} for model.{dim_key}={dim}; it must be at least 1")


def _heldout_minimum(cfg: Config, labelled: bool) -> tuple[int, str]:
    """The fewest held-out images the evaluation (method/probes.py, run/evaluation.py) can use, and why, naming the keys.

    evaluate() splits the labelled held-out images into probe-train and probe-val halves (two images each at
    least) and the kNN classifies each probe-val image by its eval.knn_k nearest probe-train images: with fewer
    than knn_k of those it would silently use fewer neighbours than configured. The nearest-neighbour artifact
    shows RETRIEVAL_QUERIES queries with RETRIEVAL_K neighbours each, labelled or not.
    """
    need, why = 0, ""
    if labelled:
        k = cfg.eval.knn_k
        need, why = MIN_LABELLED_IMAGES, (f"the linear probe needs at least {MIN_LABELLED_IMAGES} labelled "
                                          "held-out images (two per half of its train/val split)")
        if 2 * k > need:
            need, why = 2 * k, (f"the kNN evaluation classifies half of the held-out images against the other "
                                f"half with eval.knn_k={k} neighbours, so it needs at least {2 * k} "
                                "(2 x eval.knn_k); lower eval.knn_k or hold out more images")
    retrieval = RETRIEVAL_QUERIES + RETRIEVAL_K
    if cfg.eval.artifacts and retrieval > need:
        need, why = retrieval, (f"the nearest-neighbour artifact (eval.artifacts = true) shows {RETRIEVAL_QUERIES} "
                                f"held-out images with {RETRIEVAL_K} neighbours each among the others, so it needs "
                                f"at least {retrieval}")
    return need, why


def _folder_counts(root: Path) -> tuple[int, bool] | None:
    """(images, labelled) of an image folder, from the listing the loader itself uses; None when the loader will
    reject the folder anyway (it names the problem better)."""
    try:
        listing = list_image_folder(root)
    except DataError:
        return None
    return len(listing.files), bool(listing.class_names)


def _npz_counts(path: Path) -> tuple[int, bool] | None:
    """(images, has labels) of an .npz from the header of its 'images' array, without reading the pixels."""
    if not path.is_file():
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            if "images.npy" not in names:
                return None
            with archive.open("images.npy") as member:
                version = np.lib.format.read_magic(member)
                read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                               else np.lib.format.read_array_header_2_0)
                shape = read_header(member)[0]
    except (OSError, ValueError, zipfile.BadZipFile):
        return None  # unreadable here: data.load_npz raises a DataError that says why
    if not shape:
        return None
    return int(shape[0]), "labels.npy" in names


def _check_heldout(cfg: Config) -> None:
    d, batch = cfg.data, cfg.optim.batch_size
    if d.dataset == "shapes":
        need, why = _heldout_minimum(cfg, labelled=True)
        if d.num_heldout < need:
            raise ConfigError(f"data.num_heldout {d.num_heldout} is too small: {why}")
        if d.num_train < batch:  # a batch would hold the same images several times over
            raise ConfigError(f"data.num_train {d.num_train} is smaller than optim.batch_size {batch}: "
                              "render at least one batch of images or lower the batch size")
        return
    path = Path(d.path)
    try:
        counts = _folder_counts(path) if d.dataset == "folder" else _npz_counts(path)
    except (OSError, ValueError):  # a name too long, a folder we may not list: the loader's DataError says so
        counts = None
    if counts is None:
        return
    total, labelled = counts
    held = heldout_count(total, d.heldout_fraction)
    need, why = _heldout_minimum(cfg, labelled)
    if held < need:
        raise ConfigError(f"data.heldout_fraction {d.heldout_fraction} holds out {held} of the {total} images in "
                          f"data.path {d.path}, too few: {why}")
    if total - held < batch:
        raise ConfigError(f"data.path {d.path} leaves {total - held} training images after holding out {held} "
                          f"(data.heldout_fraction {d.heldout_fraction}), fewer than optim.batch_size {batch}")


MAX_WORKERS = 256  # more DataLoader processes than any machine has cores is a typo, not a plan


def _check_pipeline(cfg: Config) -> None:
    d = cfg.data
    if not 0 <= d.num_workers <= MAX_WORKERS:
        raise ConfigError(f"data.num_workers must be between 0 and {MAX_WORKERS}, got {d.num_workers}")
    if d.prefetch_factor < 1:
        raise ConfigError(f"data.prefetch_factor must be at least 1 (batches each worker keeps ready), "
                          f"got {d.prefetch_factor}")
    lo, hi = d.crop_scale
    if not 0 < lo <= hi <= 1:
        raise ConfigError(f"data.crop_scale must be [min, max] with 0 < min <= max <= 1 (fractions of the image "
                          f"area), got {d.crop_scale}")
    lo, hi = d.crop_ratio
    if not 0 < lo <= hi:
        raise ConfigError(f"data.crop_ratio must be [min, max] aspect ratios with 0 < min <= max, got {d.crop_ratio}")


def validate_config(cfg: Config) -> Config:
    _check_values(cfg)
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
    _check_mlp_width(m)

    if d.dataset not in ("shapes", "folder", "npz"):
        raise ConfigError(f"data.dataset: unknown dataset {d.dataset!r}; choose shapes, folder or npz")
    if d.dataset != "shapes" and not d.path:
        raise ConfigError(f"data.path is required when data.dataset = {d.dataset!r}")
    for name in ("num_classes", "num_train", "num_heldout"):
        _positive(f"data.{name}", getattr(d, name))
    if not 0 < d.heldout_fraction < 1:
        raise ConfigError(f"data.heldout_fraction must be in (0, 1), got {d.heldout_fraction}")
    _check_pipeline(cfg)

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
        raise ConfigError(f"optim.warmup_steps {o.warmup_steps} exceeds optim.steps {o.steps}: lower the warm-up "
                          "(optim.warmup_steps) or train longer")
    if o.loss not in ("smooth_l1", "mse"):
        raise ConfigError(f"optim.loss: unknown loss {o.loss!r}; choose smooth_l1 or mse")
    if o.batch_size % o.gns_microbatches:
        raise ConfigError(f"optim.gns_microbatches {o.gns_microbatches} must divide optim.batch_size {o.batch_size}")

    for name in ("start", "end"):
        v = getattr(cfg.ema, name)
        if not 0 <= v <= 1:
            raise ConfigError(f"ema.{name} must be in [0, 1], got {v}")
    if cfg.ema.start > cfg.ema.end:
        raise ConfigError(f"ema.start ({cfg.ema.start}) must not exceed ema.end ({cfg.ema.end}): a momentum that falls "
                          "over the run makes the target follow the online encoder ever more closely")
    if cfg.ema.schedule not in ("linear", "cosine"):
        raise ConfigError(f"ema.schedule: unknown schedule {cfg.ema.schedule!r}; choose linear or cosine")

    for name in CADENCE_KEYS:
        v = getattr(cfg.diagnostics, name)
        if v <= 0:
            raise ConfigError(f"diagnostics.{name} must be a positive number of steps, got {v}")
    _positive("eval.knn_k", cfg.eval.knn_k)
    _positive("eval.probe_epochs", cfg.eval.probe_epochs)
    if cfg.eval.noise_splits < 0:
        raise ConfigError(f"eval.noise_splits must be 0 (off) or more, got {cfg.eval.noise_splits}")
    if cfg.eval.lidar_images < 0 or cfg.eval.lidar_images == 1:
        raise ConfigError(f"eval.lidar_images must be 0 (off) or at least 2, got {cfg.eval.lidar_images}")
    if cfg.eval.lidar_views < 2:
        raise ConfigError(f"eval.lidar_views must be at least 2 (LiDAR needs a spread within each image), "
                          f"got {cfg.eval.lidar_views}")
    _positive("logging.log_every_steps", cfg.logging.log_every_steps)
    _positive("logging.checkpoint_every_steps", cfg.logging.checkpoint_every_steps)
    if cfg.logging.keep_checkpoints < 0:
        raise ConfigError(f"logging.keep_checkpoints must be 0 (keep all) or more, got {cfg.logging.keep_checkpoints}")
    if not cfg.logging.runs_dir:
        raise ConfigError("logging.runs_dir must not be empty")
    check_run_name("logging.name", cfg.logging.name)
    _check_heldout(cfg)

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
    _check_rule_metric_names(cfg)
    return cfg


def _check_rule_metric_names(cfg: Config) -> None:
    """A misspelt name in a rule's metric list would leave the rule silently watching nothing."""
    for key in ("non_finite_metrics", "ema_frozen_metrics"):
        for name in split_names(getattr(cfg.rules, key)):
            try:
                registry.metric(name)
            except KeyError as exc:
                raise ConfigError(f"rules.{key}: {exc.args[0]}") from None
