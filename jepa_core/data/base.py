"""What every dataset shares: the error type, the in-memory image set, image sources, splits and normalisation.

Two kinds of datasets feed the pipeline:

* `ImageDataset`: uint8 [N, 3, H, W] images in memory at the model's size (the built-in shapes set). A batch is a
  slice of the tensor, bit for bit what the recorded runs were trained on.
* `ImageSource` (folder, npz): images read one at a time by index, decoded and cropped in DataLoader workers; the
  dataset is never loaded whole. Labels and the file list are known from the listing alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

IMAGE_EXTENSIONS = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff"}
_NORMALIZE_EPS = 0.01  # variance floor (in [0,1] units) so flat channels are not blown up into pure noise


class DataError(ValueError):
    """Bad dataset input; the message names the file, path or config key at fault."""


class UnreadableImage(DataError):
    """One image that cannot be decoded (corrupt, truncated, not an image): the pipeline skips it and counts it."""


@dataclass
class ImageDataset:
    images: torch.Tensor  # uint8 [N, 3, H, W], CPU
    labels: torch.Tensor  # int64 [N]; -1 where unlabelled
    class_names: list[str]

    def __post_init__(self) -> None:
        if self.images.dtype != torch.uint8 or self.images.ndim != 4 or self.images.shape[1] != 3:
            raise DataError(f"ImageDataset.images must be uint8 [N, 3, H, W], got {self.images.dtype} "
                            f"{tuple(self.images.shape)}")
        if self.labels.dtype != torch.int64 or self.labels.shape != (self.images.shape[0],):
            raise DataError(f"ImageDataset.labels must be int64 [{self.images.shape[0]}], got "
                            f"{self.labels.dtype} {tuple(self.labels.shape)}")

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @property
    def is_labelled(self) -> bool:
        return bool(len(self) > 0 and (self.labels >= 0).all())

    def subset(self, indices: torch.Tensor) -> ImageDataset:
        """The images and labels at `indices` (int64), same class names."""
        return ImageDataset(self.images[indices], self.labels[indices], list(self.class_names))


@runtime_checkable
class ImageSource(Protocol):
    """Images read by index (folder, npz). `open(i)` returns a PIL image, lazily decoded where the format allows,
    so that a JPEG can be drafted at a reduced scale before its pixels are decoded; it raises UnreadableImage
    for an image that cannot be read. Implementations are picklable and cheap to fork (no Python object per image)."""

    labels: torch.Tensor  # int64 [N]; -1 where unlabelled
    class_names: list[str]

    def __len__(self) -> int: ...

    def open(self, index: int): ...

    def describe(self, index: int) -> str: ...

    def subset(self, indices: torch.Tensor) -> ImageSource: ...


Dataset = ImageDataset | ImageSource


def is_labelled(data: Dataset) -> bool:
    return bool(len(data) > 0 and (data.labels >= 0).all())


# ----------------------------------------------------------------------------------------------------------
# Splits and normalisation
# ----------------------------------------------------------------------------------------------------------

def heldout_count(n: int, heldout_fraction: float) -> int:
    """How many of `n` images `split_dataset` holds out (config validation checks it before loading anything)."""
    num_heldout = int(round(n * heldout_fraction))
    if heldout_fraction > 0 and num_heldout == 0 and n >= 2:
        num_heldout = 1  # a requested held-out split is never silently empty
    return num_heldout


def split_dataset(data: Dataset, heldout_fraction: float, seed: int) -> tuple[Dataset, Dataset]:
    """Deterministic seeded split into (train, heldout); each keeps the original order of its images."""
    if not 0.0 <= heldout_fraction < 1.0:
        raise DataError(f"data.heldout_fraction must be in [0, 1), got {heldout_fraction}")
    n = len(data)
    num_heldout = heldout_count(n, heldout_fraction)
    if n - num_heldout < 1:
        raise DataError(f"data.heldout_fraction={heldout_fraction} leaves no training images out of {n}")
    order = torch.randperm(n, generator=torch.Generator().manual_seed(int(seed)))
    heldout_idx, train_idx = order[:num_heldout].sort().values, order[num_heldout:].sort().values
    return data.subset(train_idx), data.subset(heldout_idx)


def normalize_images(batch_uint8: torch.Tensor) -> torch.Tensor:
    """float32 [B, C, H, W]: each image's channels shifted to zero mean and scaled to about unit std.

    Runs on the batch's device: the trainer copies uint8 to the GPU (a quarter of the bytes) and normalises there."""
    if batch_uint8.dtype != torch.uint8 or batch_uint8.ndim != 4:
        raise ValueError(f"normalize_images expects a uint8 [B, C, H, W] batch, got {batch_uint8.dtype} "
                         f"{tuple(batch_uint8.shape)}")
    x = batch_uint8.float() / 255.0
    mean = x.mean(dim=(2, 3), keepdim=True)
    var = x.var(dim=(2, 3), keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var + _NORMALIZE_EPS)
