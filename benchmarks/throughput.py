"""Training throughput and peak memory of the built-in presets, in one process.

Diagnostics stay at each preset's cadences (the numbers a user sees); evaluation and checkpoints are pushed out of
the timed window. Peak memory is the CUDA allocator's peak on GPU, and the growth of the process's peak RSS during
the preset's steps on CPU (the dataset is rendered before measuring starts).

    python benchmarks/throughput.py                       # tiny and small on this machine's device
    python benchmarks/throughput.py --presets tiny --steps 50
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import torch

from jepa_core.config import preset
from jepa_core.train import Trainer

NEVER = 10**9


def peak_rss_gib() -> float:
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**30


def measure(name: str, steps: int, warmup: int, device: str, run_root: Path) -> dict[str, float | str]:
    cfg = preset(name)
    cfg.runtime.device = device
    cfg.optim.steps = NEVER  # stay inside the schedules; only the step count must be out of reach
    cfg.optim.warmup_steps = 10
    cfg.data.num_train, cfg.data.num_heldout = 8 * cfg.optim.batch_size, 64
    cfg.eval.at_start = False
    cfg.diagnostics.eval_every_steps = NEVER
    cfg.logging.checkpoint_every_steps = NEVER
    cfg.logging.tensorboard = False
    trainer = Trainer(cfg, run_dir=run_root / name, quiet=True, progress=False)
    for _ in range(warmup):
        trainer.step_once()
    cuda = trainer.device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    rss_before = peak_rss_gib()
    t0 = time.perf_counter()
    for _ in range(steps):
        trainer.step_once()
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else peak_rss_gib()
    trainer.close()
    return {
        "preset": name,
        "device": str(trainer.device),
        "batch": cfg.optim.batch_size,
        "s/step": seconds / steps,
        "samples/s": steps * cfg.optim.batch_size / seconds,
        "peak GiB": peak,
        "peak kind": "cuda allocated" if cuda else f"process RSS (+{peak - rss_before:.2f} during steps)",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=["tiny", "small"])
    parser.add_argument("--steps", type=int, default=20, help="timed steps per preset (small on CPU: use few)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.presets:
            steps = args.steps if name == "tiny" or torch.cuda.is_available() else max(2, args.steps // 10)
            rows.append(measure(name, steps, args.warmup, args.device, Path(tmp)))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'preset':<8}{'device':<9}{'batch':>6}{'s/step':>10}{'samples/s':>12}{'peak GiB':>10}  peak measured as")
    for r in rows:
        print(f"{r['preset']:<8}{r['device']:<9}{r['batch']:>6}{r['s/step']:>10.3f}{r['samples/s']:>12.1f}"
              f"{r['peak GiB']:>10.2f}  {r['peak kind']}")


if __name__ == "__main__":
    main()
