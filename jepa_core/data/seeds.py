"""Where every random draw of the data pipeline comes from: pure functions of (seed, step, rank, position).

Nothing in the pipeline reads a worker's or the process's RNG state, so which images form step s's batch, their crops
and their masks are the same however many DataLoader workers there are, and a resumed run draws exactly what the
uninterrupted run drew, without saving any RNG state.

Two streams, one function each:

* `mask_generator(seed, step, rank)`: the torch.Generator of one rank's masks at one step (and the mask-leak fault
  that follows them). Its formula predates the streaming pipeline and is kept so that recorded runs stay bit-exact.
* `sample_rng(seed, step, rank, position)`: the numpy Generator of one image's augmentation (its crop and flip),
  derived by numpy's SeedSequence, which spreads neighbouring inputs over independent streams.
"""

from __future__ import annotations

import numpy as np
import torch

_U64 = (1 << 64) - 1


def mask_generator(seed: int, step: int, rank: int = 0) -> torch.Generator:
    """Mask randomness for one step of one rank."""
    return torch.Generator().manual_seed((seed * 1_000_003 + step) * 131 + rank)


def sample_rng(seed: int, step: int, rank: int, position: int) -> np.random.Generator:
    """Augmentation randomness of the image at `position` in `rank`'s slice of step `step`'s batch.

    SeedSequence entropy must be non-negative: a negative seed is taken modulo 2**64 (a bijection on int64 seeds).
    """
    entropy = [int(seed) & _U64, int(step), int(rank), int(position)]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))
