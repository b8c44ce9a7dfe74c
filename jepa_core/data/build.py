"""From config values to datasets and the training feed: the one place the trainer, `jepa check` and the
evaluation build them, so all three read the data the same way."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jepa_core.common.seeds import heldout_seed
from jepa_core.data.base import (
    DataError,
    ImageDataset,
    ImageSource,
    split_dataset,
)
from jepa_core.data.batches import TrainBatches, TrainPlan
from jepa_core.data.folder import open_image_folder
from jepa_core.data.loader import TrainFeed
from jepa_core.data.npz import open_npz
from jepa_core.data.shapes import make_shapes
from jepa_core.data.transforms import EvalTransform, TrainTransform
from jepa_core.method.masks import MaskSampler

if TYPE_CHECKING:
    from jepa_core.config import Config


def build_datasets(dataset: str, path: str, img_size: int, num_classes: int, num_train: int, num_heldout: int,
                   heldout_fraction: float, seed: int) -> tuple[ImageDataset | ImageSource, ImageDataset | ImageSource]:
    """(train, heldout). "shapes" renders `num_train`/`num_heldout` images from two seed streams, in memory;
    "folder"/"npz" list or map `path` (no pixels read) and split it by `heldout_fraction`."""
    if img_size < 4:
        raise DataError(f"data.img_size must be at least 4, got {img_size}")
    if dataset == "shapes":
        if num_train < 1:
            raise DataError(f"data.num_train must be >= 1, got {num_train}")
        if num_heldout < 0:
            raise DataError(f"data.num_heldout must be >= 0, got {num_heldout}")
        train = make_shapes(num_train, img_size, num_classes, seed)
        heldout = make_shapes(num_heldout, img_size, num_classes, heldout_seed(seed))
        return train, heldout
    if dataset in ("folder", "npz"):
        if not path:
            raise DataError(f"data.path must be set when data.dataset is {dataset!r}")
        source = open_image_folder(path) if dataset == "folder" else open_npz(path)
        return split_dataset(source, heldout_fraction, seed)
    raise DataError(f"data.dataset must be one of 'shapes', 'folder', 'npz', got {dataset!r}")


def datasets_for(cfg: Config) -> tuple[ImageDataset | ImageSource, ImageDataset | ImageSource]:
    d = cfg.data
    return build_datasets(d.dataset, d.path, cfg.model.img_size, d.num_classes, d.num_train, d.num_heldout,
                          d.heldout_fraction, cfg.runtime.seed)


def mask_sampler_for(cfg: Config) -> MaskSampler:
    k, grid = cfg.masks, cfg.model.img_size // cfg.model.patch_size
    return MaskSampler(grid, grid, k.num_targets, tuple(k.target_scale), tuple(k.target_aspect),
                       tuple(k.context_scale), tuple(k.context_aspect), k.min_keep)


def train_transform_for(cfg: Config) -> TrainTransform:
    d = cfg.data
    return TrainTransform(cfg.model.img_size, tuple(d.crop_scale), tuple(d.crop_ratio), d.hflip, d.jpeg_draft)


def eval_transform_for(cfg: Config) -> EvalTransform:
    return EvalTransform(cfg.model.img_size, cfg.data.jpeg_draft)


def train_feed_for(cfg: Config, data: ImageDataset | ImageSource, rank: int = 0, world_size: int = 1,
                   pin_memory: bool = False) -> TrainFeed:
    """This rank's batches for steps 0..optim.steps-1, read by `data.num_workers` workers."""
    f = cfg.faults
    plan = TrainPlan(cfg.runtime.seed, cfg.optim.batch_size, rank, world_size, f.mask_leak_fraction, f.start_step,
                     None if isinstance(data, ImageDataset) else train_transform_for(cfg))
    return TrainFeed(TrainBatches(data, plan, mask_sampler_for(cfg)), cfg.optim.steps, cfg.data.num_workers,
                     cfg.data.prefetch_factor, pin_memory)
