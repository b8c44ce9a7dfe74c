"""How well each label-free estimator of representation quality tracks the linear probe, per image family.

The estimators are logged by every run at the covariance cadence: RankMe of the pooled target features
(`target/effective_rank`), RankMe of the patch tokens (`target/token_effective_rank`) and LiDAR over the batch's
images with their target blocks as samples (`target/lidar`). At each evaluation of a run, the estimator's reading at
that step is paired with the probe's; the figure is Spearman's rank correlation of those pairs, within each run
(how well the estimator follows its own run's probe up and down, averaged over runs) and pooled over the runs of a
family (whether a higher reading means a better probe from one run to another).

    python research/estimators.py RUN_DIR [RUN_DIR ...]     # run directories or recorded streams
    python research/estimators.py --recorded                 # the runs of research/data/estimators (digits, shapes)
    python research/estimators.py research/data/real/clothes/*        # the test family, read once

A run's family is its data set (`data.dataset`, and the archive's file name for an npz: `digits`).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import pandas as pd

from jepa_core.config import ConfigError
from jepa_core.config.files import load_config
from jepa_core.metrics.stream import iter_rows, stream_file

REPO = Path(__file__).resolve().parent.parent
RECORDED = (REPO / "research" / "data" / "estimators",)
ESTIMATORS = ("target/lidar", "target/effective_rank", "target/token_effective_rank")
PROBE = "linear_probe/val_acc"


def ranks(values: list[float]) -> list[float]:
    """Ranks from 1, ties sharing their mean rank."""
    return pd.Series(values, dtype=float).rank(method="average").tolist()


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rank correlation; None with fewer than 3 pairs or a constant side."""
    if len(xs) != len(ys) or len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    rho = pd.Series(xs, dtype=float).corr(pd.Series(ys, dtype=float), method="spearman")
    return round(float(rho), 12)  # Pearson of the ranks: exact correlations come out 1 - 1e-16


def family(run_dir: Path) -> str:
    try:
        cfg = load_config(run_dir / "config.toml")
    except (OSError, ValueError, ConfigError):
        return "unknown"
    if cfg.data.dataset == "npz":
        return Path(cfg.data.path).stem or "npz"
    return cfg.data.dataset


def pairs(run_dir: Path) -> dict[str, list[tuple[float, float]]]:
    """{estimator: [(its reading at an evaluation step, the probe there)]} for one run."""
    latest: dict[str, float] = {}
    out: dict[str, list[tuple[float, float]]] = {e: [] for e in ESTIMATORS}
    for row in iter_rows(stream_file(run_dir)):
        if "event" in row:
            continue
        for e in ESTIMATORS:
            if isinstance(row.get(e), (int, float)):
                latest[e] = float(row[e])
        if isinstance(row.get(PROBE), (int, float)):
            for e in ESTIMATORS:
                if e in latest:
                    out[e].append((latest[e], float(row[PROBE])))
    return out


def report(run_dirs: list[Path]) -> list[str]:
    by_family: dict[str, list[dict[str, list[tuple[float, float]]]]] = {}
    for run_dir in run_dirs:
        by_family.setdefault(family(run_dir), []).append(pairs(run_dir))
    lines = [f"{'family':<10} {'estimator':<28} {'runs':>4} {'within-run rho (mean)':>22} {'pooled rho':>11} {'pairs':>6}"]
    for fam, runs in sorted(by_family.items()):
        for e in ESTIMATORS:
            within = [r for run in runs if (r := spearman(*map(list, zip(*run[e])) if run[e] else ([], []))) is not None]
            pooled = [p for run in runs for p in run[e]]
            rho = spearman([a for a, _ in pooled], [b for _, b in pooled]) if pooled else None
            mean = f"{statistics.fmean(within):+.2f}" if within else "-"
            lines.append(f"{fam:<10} {e:<28} {len(within):>4} {mean:>22} "
                         f"{(f'{rho:+.2f}' if rho is not None else '-'):>11} {len(pooled):>6}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="*", type=Path)
    p.add_argument("--recorded", action="store_true", help="the recorded runs of research/data/estimators")
    args = p.parse_args(argv)
    runs = list(args.runs)
    if args.recorded:
        runs += sorted(d.parent for root in RECORDED for d in root.glob("**/config.toml"))
    if not runs:
        p.error("give run directories or --recorded")
    print("\n".join(report(runs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
