"""The checks of a run config that need more than the config: the data on disk, the mask sampler, the evaluation and
the metric registry. `validate_config` runs the config's own check first (jepa_core.config.check: types, ranges,
cross-field checks), then these; every refusal is a ConfigError naming the key, before any work starts."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from jepa_core.config import Config, ConfigError, check_config
from jepa_core.config.rules import split_names
from jepa_core.data import DataError, heldout_count, list_image_folder
from jepa_core.method.masks import MaskConfigError, check_mask_config
from jepa_core.method.probes import MIN_LABELLED_IMAGES
from jepa_core.metrics import registry
from jepa_core.run.evaluation import RETRIEVAL_K, RETRIEVAL_QUERIES


def validate_config(cfg: Config) -> Config:
    check_config(cfg)
    m, k = cfg.model, cfg.masks
    grid = m.img_size // m.patch_size
    try:
        check_mask_config(grid, grid, k.num_targets, tuple(k.target_scale), tuple(k.target_aspect),
                          tuple(k.context_scale), tuple(k.context_aspect), k.min_keep)
    except MaskConfigError as exc:
        raise ConfigError(f"{exc} (patch grid {grid}x{grid})") from exc
    _check_heldout(cfg)
    _check_rule_metric_names(cfg)
    return cfg


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


def _check_rule_metric_names(cfg: Config) -> None:
    """A misspelt name in a rule's metric list would leave the rule silently watching nothing."""
    for key in ("non_finite_metrics", "ema_frozen_metrics"):
        for name in split_names(getattr(cfg.rules, key)):
            try:
                registry.metric(name)
            except KeyError as exc:
                raise ConfigError(f"rules.{key}: {exc.args[0]}") from None
