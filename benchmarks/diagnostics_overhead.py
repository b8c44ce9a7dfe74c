"""Cost of the diagnostics (design §6): step time with them off, at the preset's cadences, and all every step.

One process, one Trainer per preset; the modes are switched live with ``Trainer.set_cadences``. Evaluation and
checkpoints are pushed out of the timed window; the sinks are the preset's (TensorBoard included), because writing
the rows is part of what the diagnostics cost a user.

The decisive figure is the default cadences measured directly: rounds of one "off" window and one "default" window,
each a whole cadence cycle (the cadences' least common multiple, so every diagnostic runs its share), in alternating
order (off first, then default first) so that drift and order effects cancel. Each round gives a ratio; the
benchmark runs rounds until the 95% confidence interval of the median ratio (distribution-free, from order
statistics) is narrower than ``--spread`` on each side, or ``--max-rounds`` is reached, and prints the interval: one
run decides whether the 5% target holds. Per-tier costs (each group alone every step, minus off) are also printed
and projected to the default cadences, to show where the time goes.

    python benchmarks/diagnostics_overhead.py --presets tiny --threads 2    # the figure in the README
    python benchmarks/diagnostics_overhead.py --presets tiny --no-tiers     # only the decisive ratio
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
    if args.tensorboard is not None:
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
    # Tiers: every figure is paired with the "off" block of its own round (drift cancels), median over rounds.
    times: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(args.rounds if args.tiers else 0):
        for mode, cad in modes.items():
            trainer.set_cadences(cad)
            trainer.step_once()  # the change applies from the next step
            times[mode].append(timed_steps(trainer, args.steps))
    default_ratio: list[float] = []
    if measure_default:
        while len(default_ratio) < args.max_rounds:
            order = ("off", "default") if len(default_ratio) % 2 == 0 else ("default", "off")
            window_time = {}
            for mode in order:
                trainer.set_cadences(modes["off"] if mode == "off" else cadences(default, every))
                align(trainer, window)
                window_time[mode] = timed_steps(trainer, window)
            default_ratio.append(window_time["default"] / window_time["off"])
            low, high = median_interval(default_ratio)
            centre = statistics.median(default_ratio)
            if len(default_ratio) >= args.min_rounds and max(centre - low, high - centre) <= args.spread:
                break
    trainer.close()

    cfg = trainer.cfg
    print(f"\n## {name}: device {trainer.device}, batch {cfg.optim.batch_size}, cadences "
          + ", ".join(f"{k.removesuffix('_every_steps')} {v}" for k, v in every.items())
          + f"; TensorBoard {'on' if cfg.logging.tensorboard else 'off'}")
    if default_ratio:
        low, high = median_interval(default_ratio)
        ratio = statistics.median(default_ratio)
        verdict = "meets" if high <= 1.05 else ("misses" if low > 1.05 else "cannot decide")
        print(f"default cadences vs off (measured): {ratio:.3f}x, 95% CI {low:.3f}-{high:.3f} over "
              f"{len(default_ratio)} rounds of {window}-step windows (rounds ranged {min(default_ratio):.3f}-"
              f"{max(default_ratio):.3f}); target <= 1.05: {verdict}")
    else:
        print(f"default cadences: not measured directly (cadence window {window} > --max-window {args.max_window})")
    if not args.tiers:
        return
    off_runs = times["off"]
    off = statistics.median(off_runs)

    def paired(mode: str) -> float:
        return statistics.median(t - o for t, o in zip(times[mode], off_runs))

    print(f"\nper tier: {args.rounds} rounds x {args.steps} steps per mode; medians of per-round differences to off")
    print(f"off: {off * 1e3:.2f} ms/step (rounds ranged {min(off_runs) * 1e3:.2f} to {max(off_runs) * 1e3:.2f})")
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
          f"   (the step's diagnostic hooks only; the measured ratio above also counts writing the rows)")


def median_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float]:
    """A distribution-free confidence interval of the median: the order statistics whose ranks a Binomial(n, 1/2)
    brackets with at least `confidence` (the whole range when there are too few values for that)."""
    xs, n = sorted(values), len(values)
    best = (xs[0], xs[-1])
    for k in range(1, n // 2 + 1):
        # P(X_(k) <= median <= X_(n-k+1)) = 1 - 2 * P(Binomial(n, 1/2) <= k - 1)
        tail = sum(math.comb(n, i) for i in range(k)) / 2**n
        if 1 - 2 * tail < confidence:
            break
        best = (xs[k - 1], xs[n - k])
    return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--presets", nargs="+", default=["tiny", "small"])
    p.add_argument("--device", default="auto")
    p.add_argument("--batch-size", type=int, default=0, help="override the preset's batch size (0 keeps it)")
    p.add_argument("--steps", type=int, default=20, help="timed steps per mode per round")
    p.add_argument("--rounds", type=int, default=3, help="rounds of the per-tier timing")
    p.add_argument("--tiers", action=argparse.BooleanOptionalAction, default=True, help="time each tier alone too")
    p.add_argument("--min-rounds", type=int, default=8, help="rounds of the default-vs-off ratio before stopping")
    p.add_argument("--max-rounds", type=int, default=40)
    p.add_argument("--spread", type=float, default=0.01,
                   help="stop once the median ratio's 95%% CI is within this on each side (default 0.01)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--max-window", type=int, default=200,
                   help="measure the default cadence directly only if all its cadences fit in this many steps")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0 keeps the default)")
    p.add_argument("--tensorboard", action=argparse.BooleanOptionalAction, default=None,
                   help="TensorBoard sink on or off (default: as the preset has it)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="jepa-bench-") as tmp:
        for name in args.presets:
            bench_preset(name, args, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
