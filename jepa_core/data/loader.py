"""DataLoader plumbing: worker processes read whole batches ahead of the trainer, in step order.

`TrainFeed.get(step)` hands the trainer the batch of `step`. With `data.num_workers = 0` the batch is built in the
training process; otherwise a DataLoader over `TrainBatches` (batch_size=None: one item is one step's batch) keeps
`num_workers * prefetch_factor` batches in flight, pins them for an asynchronous copy to the GPU, and keeps its
workers for the life of the run (persistent workers, one iterator across pauses). Asking for any other step than
the next one restarts the iterator there: every batch is a pure function of its step, so nothing changes but time.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.utils.data import DataLoader, Sampler

from jepa_core.data.base import ImageDataset
from jepa_core.data.batches import Batch, EvalBatches, Skipped, TrainBatches


class _StepRange(Sampler[int]):
    """Steps start..end-1; `start` is set before each new iterator (a resume, or a jump in the steps asked for)."""

    def __init__(self, end: int) -> None:
        self.start, self.end = 0, end

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start, self.end))

    def __len__(self) -> int:
        return max(0, self.end - self.start)


class TrainFeed:
    def __init__(self, batches: TrainBatches, end_step: int, num_workers: int = 0, prefetch_factor: int = 2,
                 pin_memory: bool = False) -> None:
        self.batches = batches
        self.num_workers, self.prefetch_factor, self.pin_memory = num_workers, prefetch_factor, pin_memory
        self._steps = _StepRange(end_step)
        self._loader: DataLoader | None = None
        self._iter: Iterator[Batch] | None = None
        self._next = -1

    def get(self, step: int) -> Batch:
        if self.num_workers == 0 or step >= self._steps.end:
            batch = self.batches[step]
            return batch.pin_memory() if self.pin_memory else batch
        if self._iter is None or step != self._next:
            self._steps.start = step
            if self._loader is None:
                self._loader = DataLoader(self.batches, batch_size=None, sampler=self._steps,
                                          num_workers=self.num_workers, prefetch_factor=self.prefetch_factor,
                                          pin_memory=self.pin_memory, persistent_workers=True)
            self._iter = iter(self._loader)
        batch = next(self._iter)
        if batch.step != step:  # cannot happen with an in-order DataLoader; a wrong batch must never train
            raise RuntimeError(f"data loader delivered step {batch.step} when step {step} was asked for")
        self._next = step + 1
        return batch

    def close(self) -> None:
        """Stop the worker processes now (not whenever the garbage collector gets to the iterator)."""
        it, self._iter, self._loader = self._iter, None, None
        shutdown = getattr(it, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()


def eval_batches(batches: EvalBatches, num_workers: int = 0, pin_memory: bool = False,
                 ) -> Iterator[tuple[torch.Tensor, Skipped]]:
    """The held-out batches in order. In-memory data is sliced in this process; streamed data is decoded by up to
    `num_workers` short-lived workers (an evaluation is rare: no processes are kept between evaluations)."""
    workers = min(num_workers, len(batches))
    if workers == 0 or isinstance(batches.data, ImageDataset):
        for j in range(len(batches)):
            yield batches[j]
        return
    loader = DataLoader(batches, batch_size=None, sampler=range(len(batches)), num_workers=workers,
                        pin_memory=pin_memory)
    yield from loader
