"""Cost of the diagnostics (SPEC §6): step time with them off, at the preset's cadences, and all every step.

One process, one Trainer per preset; the modes are switched live with ``Trainer.set_cadences`` and interleaved in
rounds so that drift (thermal, other processes) hits every mode alike. Evaluation and checkpoints are pushed out of
the timed window. Per-tier cost = (that tier alone every step) − (off), per step. The "default" overhead is measured
directly over a window covering every cadence when it fits ``--max-window``; it is always also projected from the
tier costs as Σ cost / cadence. Target: default cadence ≤ 5 % over off.

    python benchmarks/diagnostics_overhead.py                      # tiny + small, device auto
    python benchmarks/diagnostics_overhead.py --presets tiny --batch-size 32 --threads 1   # a quick CPU look
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from jepa_core.config import DiagnosticsConfig, preset
from jepa_core.metrics.instrument import CADENCE_KEYS, GROUPS
from jepa_core.run.trainer import Trainer

NEVER = 10**9  # a cadence no timed step reaches


def cadences(cfg_default: DiagnosticsConfig, every: dict[str, int]) -> DiagnosticsConfig:
    values = {k: every.get(k, NEVER) for k in CADENCE_KEYS}
    return dataclasses.replace(cfg_default, eval_every_steps=NEVER, **values)


def build_trainer(name: str, args: argparse.Namespace, run_dir: Path) -> Trainer:
    cfg = preset(name)
    cfg.runtime.device = args.device
    if args.batch_size:
        cfg.optim.batch_size = args.batch_size
    cfg.optim.steps = 1_000_000  # schedules stay in warm-up territory; the step count only has to be out of reach
    cfg.data.num_train, cfg.data.num_heldout = 4 * cfg.optim.batch_size, 64
    cfg.eval.at_start = False
    cfg.diagnostics.eval_every_steps = NEVER
    cfg.logging.checkpoint_every_steps = NEVER
    cfg.logging.tensorboard = args.tensorboard
    cfg.logging.progress_bar = False
    return Trainer(cfg, run_dir=run_dir / name, quiet=True, progress=False)


def timed_steps(trainer: Trainer, n: int) -> float:
    """Mean seconds per step over n steps (device synchronised at both ends)."""
    sync = torch.cuda.synchronize if trainer.device.type == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        trainer.step_once()
    sync()
    return (time.perf_counter() - t0) / n


def align(trainer: Trainer, window: int) -> None:
    """Step (diagnostics off) until the next step is 1 mod window, so a window sees each cadence equally often."""
    while trainer.step % window != 0:
        trainer.step_once()


def bench_preset(name: str, args: argparse.Namespace, run_dir: Path) -> None:
    trainer = build_trainer(name, args, run_dir)
    default = dataclasses.replace(trainer.cfg.diagnostics)
    every = {k: getattr(default, k) for k in CADENCE_KEYS}
    modes = {"off": cadences(default, {}), "all every step": cadences(default, {k: 1 for k in CADENCE_KEYS})}
    for group in GROUPS:
        modes[f"tier {group.name}"] = cadences(default, {group.cadence_key: 1})
    window = math.lcm(*every.values())
    measure_default = window <= args.max_window

    trainer.set_cadences(modes["off"])
    timed_steps(trainer, args.warmup)
    # Every figure is paired with the "off" block of its own round (drift cancels), then the median over rounds.
    times: dict[str, list[float]] = {m: [] for m in modes}
    default_ratio: list[float] = []
    for _ in range(args.rounds):
        for mode, cad in modes.items():
            trainer.set_cadences(cad)
            trainer.step_once()  # the change applies from the next step
            times[mode].append(timed_steps(trainer, args.steps))
        if measure_default:
            trainer.set_cadences(modes["off"])
            align(trainer, window)
            off_window = timed_steps(trainer, window)
            trainer.set_cadences(cadences(default, every))
            align(trainer, window)
            default_ratio.append(timed_steps(trainer, window) / off_window)
    trainer.close()

    off_runs = times["off"]
    off = statistics.median(off_runs)

    def paired(mode: str) -> float:
        return statistics.median(t - o for t, o in zip(times[mode], off_runs))

    cfg = trainer.cfg
    print(f"\n## {name}: device {trainer.device}, batch {cfg.optim.batch_size}, "
          f"{args.rounds} rounds x {args.steps} steps per mode; medians of per-round differences to off")
    print(f"off: {off * 1e3:.2f} ms/step (rounds ranged {min(off_runs) * 1e3:.2f} to {max(off_runs) * 1e3:.2f})")
    print(f"{'mode':<28}{'ms/step':>10}{'vs off':>10}")
    print(f"{'off':<28}{off * 1e3:>10.2f}{1.0:>10.3f}")
    if default_ratio:
        ratio = statistics.median(default_ratio)
        print(f"{'default (measured)':<28}{ratio * off * 1e3:>10.2f}{ratio:>10.3f}")
    else:
        print(f"{'default (measured)':<28}  skipped: cadence window {window} > --max-window {args.max_window}")
    extra = paired("all every step")
    print(f"{'all every step':<28}{(off + extra) * 1e3:>10.2f}{(off + extra) / off:>10.3f}")
    print(f"\n{'tier (per call)':<28}{'ms/call':>10}{'every':>8}{'ms/step at default':>20}")
    projected = 0.0
    for group in GROUPS:
        cost = max(paired(f"tier {group.name}"), 0.0)
        per_step = cost / every[group.cadence_key]
        projected += per_step
        print(f"{group.name:<28}{cost * 1e3:>10.2f}{every[group.cadence_key]:>8}{per_step * 1e3:>20.3f}")
    print(f"{'default (projected)':<28}{(off + projected) * 1e3:>10.2f}{(off + projected) / off:>10.3f}"
          f"   target: <= 1.05")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--presets", nargs="+", default=["tiny", "small"])
    p.add_argument("--device", default="auto")
    p.add_argument("--batch-size", type=int, default=0, help="override the preset's batch size (0 keeps it)")
    p.add_argument("--steps", type=int, default=20, help="timed steps per mode per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--max-window", type=int, default=100,
                   help="measure the default cadence directly only if all its cadences fit in this many steps")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0 keeps the default)")
    p.add_argument("--tensorboard", action="store_true", help="keep the TensorBoard sink on (off by default)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="jepa-bench-") as tmp:
        for name in args.presets:
            bench_preset(name, args, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
