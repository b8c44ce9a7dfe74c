"""Data-parallel plumbing for `torchrun`: process-group setup, DDP wrapping, metric reduction. A no-op alone."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn


@dataclass(frozen=True)
class DistContext:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def init_if_needed(device: str) -> None:
    """Join the process group torchrun describes in the environment (nccl on CUDA, gloo on CPU)."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
        use_cuda = device != "cpu" and torch.cuda.is_available()
        if use_cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")


def context() -> DistContext:
    if not (dist.is_available() and dist.is_initialized()):
        return DistContext()
    return DistContext(dist.get_rank(), int(os.environ.get("LOCAL_RANK", "0")), dist.get_world_size())


def wrap(module: nn.Module, ctx: DistContext, device: torch.device) -> nn.Module:
    if not ctx.enabled:
        return module
    from torch.nn.parallel import DistributedDataParallel

    ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(module, device_ids=ids)


def broadcast_path(paths, ctx: DistContext):
    """Rank 0 created the run directory; every rank learns its path."""
    return broadcast_object(paths, ctx) if ctx.enabled else paths


def broadcast_object(value, ctx: DistContext):
    """Rank 0's value on every rank (a small pickled object)."""
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def any_rank(flag: bool, ctx: DistContext) -> bool:
    """True on every rank when the flag is set on at least one (a stop signal may reach the ranks at different
    moments; they must still stop at the same step)."""
    if not ctx.enabled:
        return flag
    t = torch.tensor([1.0 if flag else 0.0])
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


# Metrics that describe the global batch; the rest (representation statistics) are rank 0's view of its slice.
_MEAN_REDUCED = ("loss", "pred_target/mse", "pred_target/mae", "pred_target/cosine")


def reduce_metrics(metrics: dict[str, float], ctx: DistContext) -> dict[str, float]:
    if not ctx.enabled:
        return metrics
    keys = [k for k in _MEAN_REDUCED if k in metrics]
    if not keys:
        return metrics
    t = torch.tensor([float(metrics[k]) for k in keys], dtype=torch.float64)
    if dist.get_backend() == "nccl":
        t = t.cuda()
    dist.all_reduce(t)
    t /= ctx.world_size
    return {**metrics, **dict(zip(keys, t.tolist()))}


def shutdown() -> None:
    """Leave the process group together: a rank that tears its group down while another still talks to it, or
    that leaves the group's worker threads to the interpreter's exit, aborts ("terminate called without an active
    exception"). Callers drop their DDP wrapper first (it holds the group)."""
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
