"""Which images form each step's batch, and the batch itself: images, masks and any image that had to be skipped.

`TrainBatches[s]` is a pure function of (seed, step, rank): the indices come from a seeded permutation per epoch,
each image's crop from common.seeds.sample_rng(seed, step, rank, position), the masks from common.seeds.mask_generator(seed, step,
rank). A DataLoader worker computing it, or the training process computing it, gives the same bytes, so the number
of workers never changes a run and a resumed run reads exactly what the uninterrupted one read.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch
from torch.utils.data import Dataset as TorchDataset

from jepa_core.common.seeds import epoch_permutation_seed, mask_generator, sample_rng
from jepa_core.data.base import DataError, ImageDataset, ImageSource, UnreadableImage
from jepa_core.data.transforms import DECODE_ERRORS, EvalTransform, TrainTransform
from jepa_core.method.masks import MaskBatch, MaskSampler, leak_targets

MAX_SUBSTITUTES = 16  # an unreadable image is replaced by the next one in the dataset; this many in a row is fatal
Skipped = list[tuple[str, str]]  # (which image, why) for each image that could not be read


@functools.lru_cache(maxsize=4)
def _epoch_permutation(n: int, seed: int, epoch: int) -> torch.Tensor:
    # Cached (read-only: callers slice and concatenate): a million-image permutation costs milliseconds per step.
    return torch.randperm(n, generator=torch.Generator().manual_seed(epoch_permutation_seed(seed, epoch)))


def batch_indices(n: int, batch_size: int, step: int, seed: int) -> torch.Tensor:
    """int64 [batch_size]: dataset indices for training step `step`, a pure function of its arguments.

    Steps walk through a fresh seeded permutation each epoch (epoch = position // n); a batch that straddles
    an epoch boundary takes the end of one permutation and the start of the next.
    """
    if n < 1:
        raise DataError(f"cannot draw batches from an empty dataset (n={n})")
    if batch_size < 1:
        raise DataError(f"batch size must be >= 1, got {batch_size}")
    if step < 0:
        raise DataError(f"step must be >= 0, got {step}")
    start, stop = step * batch_size, (step + 1) * batch_size
    parts = []
    for epoch in range(start // n, (stop - 1) // n + 1):
        perm = _epoch_permutation(n, seed, epoch)
        lo, hi = max(start, epoch * n) - epoch * n, min(stop, (epoch + 1) * n) - epoch * n
        parts.append(perm[lo:hi])
    return torch.cat(parts)


def epoch_of_step(n: int, batch_size: int, step: int) -> float:
    """Fractional epoch reached after `step` batches (for the `epoch` metric)."""
    return step * batch_size / n


def read_image(source: ImageSource, index: int, transform: Callable, rng: Callable[[], np.random.Generator],
               ) -> tuple[torch.Tensor, Skipped]:
    """Image `index` through `transform`; an unreadable one is replaced by the next readable image (a pure function
    of the dataset, so resume and worker count do not matter) and reported in the returned list."""
    skipped: Skipped = []
    n = len(source)
    for k in range(min(MAX_SUBSTITUTES, n)):
        j = (index + k) % n
        try:
            with source.open(j) as image:
                return transform(image, rng()), skipped
        except DECODE_ERRORS as exc:  # includes UnreadableImage (a DataError, hence a ValueError)
            cause = exc.__cause__ if isinstance(exc, UnreadableImage) and exc.__cause__ is not None else exc
            skipped.append((source.describe(j), f"{type(cause).__name__}: {cause}"))
    raise DataError(f"{len(skipped)} images in a row from {source.describe(index)} cannot be read (last: "
                    f"{skipped[-1][1]}); the dataset looks damaged")


@dataclass
class Batch:
    step: int
    images: torch.Tensor  # uint8 [b, 3, S, S]: this rank's slice of the global batch
    masks: MaskBatch
    skipped: Skipped = field(default_factory=list)

    def pin_memory(self) -> Batch:
        """Page-locked copies (DataLoader's pin thread calls this): the trainer's copy to the GPU is asynchronous."""
        return Batch(self.step, self.images.pin_memory(),
                     MaskBatch(self.masks.context_idx.pin_memory(), self.masks.target_idx.pin_memory()),
                     self.skipped)


@dataclass(frozen=True)
class TrainPlan:
    seed: int
    batch_size: int  # global
    rank: int = 0
    world_size: int = 1
    leak_fraction: float = 0.0  # faults.mask_leak_fraction, from leak_start on
    leak_start: int = 0
    transform: TrainTransform | None = None  # streamed sources only; in-memory shapes are used as rendered


class TrainBatches(TorchDataset):
    """Map-style dataset whose item `step` is this rank's whole batch for that step (so a DataLoader runs with
    batch_size=None): each worker decodes, crops and masks whole batches, and the training process only moves them."""

    def __init__(self, data: ImageDataset | ImageSource, plan: TrainPlan, mask_sampler: MaskSampler) -> None:
        if not isinstance(data, ImageDataset) and plan.transform is None:
            raise ValueError("TrainBatches: a streamed source needs a TrainTransform")
        self.data, self.plan, self.mask_sampler = data, plan, mask_sampler

    def indices(self, step: int) -> torch.Tensor:
        p = self.plan
        return batch_indices(len(self.data), p.batch_size, step, p.seed).chunk(p.world_size)[p.rank]

    def __getitem__(self, step: int) -> Batch:
        p = self.plan
        idx = self.indices(step)
        skipped: Skipped = []
        if isinstance(self.data, ImageDataset):
            images = self.data.images[idx]
        else:
            images = torch.empty(len(idx), 3, p.transform.size, p.transform.size, dtype=torch.uint8)
            for position, index in enumerate(idx.tolist()):
                rng = functools.partial(sample_rng, p.seed, step, p.rank, position)
                images[position], bad = read_image(self.data, index, p.transform, rng)
                skipped += bad
        gen = mask_generator(p.seed, step, p.rank)
        masks = self.mask_sampler.sample(len(idx), gen)
        if p.leak_fraction > 0 and step >= p.leak_start:
            masks = leak_targets(masks, p.leak_fraction, gen)  # the same generator, after the masks: as recorded
        return Batch(step, images, masks, skipped)


class EvalBatches(TorchDataset):
    """Item j: uint8 images of `indices[j * batch_size : (j + 1) * batch_size]` through the evaluation transform,
    and the images skipped on the way. Nothing random."""

    def __init__(self, data: ImageDataset | ImageSource, indices: torch.Tensor, batch_size: int,
                 transform: EvalTransform | None) -> None:
        if not isinstance(data, ImageDataset) and transform is None:
            raise ValueError("EvalBatches: a streamed source needs an EvalTransform")
        self.data, self.indices, self.batch_size, self.transform = data, indices, batch_size, transform

    def __len__(self) -> int:
        return math.ceil(len(self.indices) / self.batch_size)

    def __getitem__(self, j: int) -> tuple[torch.Tensor, Skipped]:
        chunk = self.indices[j * self.batch_size:(j + 1) * self.batch_size]
        if isinstance(self.data, ImageDataset):
            return self.data.images[chunk], []
        size = self.transform.size
        images = torch.empty(len(chunk), 3, size, size, dtype=torch.uint8)
        skipped: Skipped = []
        for position, index in enumerate(chunk.tolist()):
            images[position], bad = read_image(self.data, index, self.transform, lambda: None)
            skipped += bad
        return images, skipped
