"""System figures for the `basic` group (design §6): CUDA allocator memory, and this process's CPU use and RSS.

Host-side counters only: nothing here touches a tensor or syncs a device.
"""

from __future__ import annotations

import psutil
import torch

__all__ = ["memory_stats", "SystemStats"]

_GIB = float(1024**3)


def memory_stats(device: torch.device | str) -> dict[str, float]:
    """CUDA allocator figures in GiB for a CUDA device (host-side counters, no sync); empty otherwise."""
    dev = torch.device(device)
    if dev.type != "cuda" or not torch.cuda.is_available():
        return {}
    return {
        "memory/cuda_allocated_gb": torch.cuda.memory_allocated(dev) / _GIB,
        "memory/cuda_reserved_gb": torch.cuda.memory_reserved(dev) / _GIB,
        "memory/cuda_peak_gb": torch.cuda.max_memory_allocated(dev) / _GIB,
    }


class SystemStats:
    """This process's CPU use since the previous reading (percent of one core, can exceed 100) and RSS in GiB.
    One per owner (the trainer's instrumentation): the CPU window is the owner's, not a module-wide one."""

    def __init__(self) -> None:
        self.process = psutil.Process()
        self.process.cpu_percent(interval=None)  # the first reading only starts the measurement window

    def __call__(self) -> dict[str, float]:
        return {"system/cpu_percent": float(self.process.cpu_percent(interval=None)),
                "system/ram_gb": self.process.memory_info().rss / _GIB}
