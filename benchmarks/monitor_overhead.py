"""What watching costs a loop we did not write: examples/own_loop.py with jepa_core.monitor at its default cadences
against the same loop unwatched (`--no-monitor`), in one process.

Each round trains the example once each way, in alternating order (unwatched first, then watched first) so that
drift and order effects cancel, over a whole cadence cycle (500 steps: every diagnostic runs its share) and without
evaluation (the evaluation is its own cadence, as in the trainer's overhead benchmark). The loop's own time is
compared (data is built before it in both modes). Prints each round's ratio, the median ratio and its
distribution-free 95% interval.

    python benchmarks/monitor_overhead.py --steps 500 --rounds 8 --threads 2
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from diagnostics_overhead import median_interval  # noqa: E402

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "own_loop.py"


def load_example():
    spec = importlib.util.spec_from_file_location("own_loop_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def inside(folder: Path):
    here = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(here)


def main(argv: list[str] | None = None) -> list[float]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=500, help="steps per run (500: one cycle of the default cadences)")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    example = load_example()
    ratios = []
    with tempfile.TemporaryDirectory() as folder, inside(Path(folder)):
        for r in range(args.rounds):
            seconds = {}
            for mode in (("off", "on") if r % 2 == 0 else ("on", "off")):
                flags = ["--no-monitor"] if mode == "off" else []
                seconds[mode] = example.main(["--steps", str(args.steps), "--default-cadences",
                                              "--name", f"round{r}-{mode}", *flags])
            ratios.append(seconds["on"] / seconds["off"])
            print(f"round {r + 1}: unwatched {seconds['off']:.2f} s, watched {seconds['on']:.2f} s, "
                  f"ratio {ratios[-1]:.3f}", flush=True)
    low, high = median_interval(ratios)
    print(f"watched / unwatched loop time: median {statistics.median(ratios):.3f} "
          f"(95% interval {low:.3f} to {high:.3f}, {len(ratios)} rounds, {args.steps} steps each, "
          f"{args.threads} threads)")
    return ratios


if __name__ == "__main__":
    main()
