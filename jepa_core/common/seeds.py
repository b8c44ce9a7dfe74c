"""Every seed a run derives from `runtime.seed`, in one place: pure functions of (seed, step, rank, position, ...).

Nothing reads a worker's or the process's RNG state, so which images form step s's batch, their crops and masks, and
what a diagnostic subsamples are the same however many DataLoader workers there are, and a resumed run draws exactly
what the uninterrupted run drew, without saving any RNG state.

One function per stream. New streams use `sample_rng`'s recipe (numpy's SeedSequence, which spreads neighbouring
inputs over independent streams). The older ones keep their arithmetic formulas: every recorded run (data/runs,
research/data/library) was trained with them, and changing one would change those trajectories.

* `mask_generator(seed, step, rank)`: one rank's masks at one step (and the mask-leak fault that follows them);
* `epoch_permutation_seed(seed, epoch)`: the order of the training set in one epoch;
* `heldout_seed(seed)`: the built-in shapes' held-out images (a stream apart from the training images);
* `diagnostic_generator(step, salt)`: what a diagnostic subsamples at one step (salt: which diagnostic); the only
  stream that does not read `runtime.seed`, on purpose (see the function);
* `sample_rng(seed, step, rank, position)`: one image's augmentation (its crop and flip);
* `fixed_probe_generator()`: the fixed noise batch on which the target's statistics are compared over time.
"""

from __future__ import annotations

import numpy as np
import torch

_U64 = (1 << 64) - 1


def mask_generator(seed: int, step: int, rank: int = 0) -> torch.Generator:
    """Mask randomness for one step of one rank."""
    return torch.Generator().manual_seed((seed * 1_000_003 + step) * 131 + rank)


def epoch_permutation_seed(seed: int, epoch: int) -> int:
    """A 63-bit torch seed for the permutation of one epoch (golden-ratio multipliers spread nearby seeds apart)."""
    return (int(seed) * 0x9E3779B97F4A7C15 + int(epoch) * 0xBF58476D1CE4E5B9 + 1) % (2**63)


HELDOUT_SEED_OFFSET = 1_000_003


def heldout_seed(seed: int) -> int:
    """The seed of the built-in shapes' held-out images: a stream apart from the training images'."""
    return int(seed) + HELDOUT_SEED_OFFSET


def diagnostic_generator(step: int, salt: int) -> torch.Generator:
    """Which token rows the diagnostic numbered `salt` (0 or 1) subsamples at `step`.

    A function of the step alone, not of `runtime.seed`: runs of different seeds are then measured at the same
    row positions of their batches (their readings differ by their training, not by the measurement's draw),
    and the subsample is independent of the data whatever the seed, so nothing is biased. It was seed 0 for
    every run from the start, so the recorded runs' readings stay valid."""
    return torch.Generator().manual_seed(int(step) * 2 + int(salt))


def sample_rng(seed: int, step: int, rank: int, position: int) -> np.random.Generator:
    """Augmentation randomness of the image at `position` in `rank`'s slice of step `step`'s batch.

    SeedSequence entropy must be non-negative: a negative seed is taken modulo 2**64 (a bijection on int64 seeds).
    """
    entropy = [int(seed) & _U64, int(step), int(rank), int(position)]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))


FIXED_PROBE_SEED = 1234


def fixed_probe_generator() -> torch.Generator:
    """The fixed probe batch's noise: the same for every run and every step, so that a target encoder that is never
    updated reads bit-identical statistics on it (and recorded runs were measured on it)."""
    return torch.Generator().manual_seed(FIXED_PROBE_SEED)
