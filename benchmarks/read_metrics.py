"""Benchmark: reading metrics.jsonl with `jepa_core.metrics.stream.read_metrics` vs `pandas.read_json(lines=True)`.

    python benchmarks/read_metrics.py [--rows 1000000] [--repeats 3] [--follow-polls 20]

Generates a realistic stream in a temp dir (sparse rows at mixed cadences, non-finite losses written as strings,
alert rows, a resume whose attempt 2 restarts 100 steps back), then prints, for both readers in this process, the
best wall time and best CPU time of `--repeats` runs (alternating between the two), their ratio, and the peak
memory each needs (peak RSS, sampled every 5 ms, of a fresh child process minus its RSS after imports). CPU
time is reported beside wall time because the machine may be shared.
Then it grows a file by a fixed number of rows per step and times `MetricsFollower.poll`: the cost per call
should stay flat while the file grows, since each poll reads only the new bytes. Last, what the notebooks pay:
`LiveRun.poll` (the followed bytes decoded by the same row reader as `read_metrics`, and the frames rebuilt from
every row followed so far) on runs of growing length, 200 new rows a poll; that cost grows with the run's length.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec
import pandas as pd

from jepa_core.metrics.follower import MetricsFollower

from jepa_core.metrics.reader import read_metrics
from jepa_core.workbench.live import LiveRun

BASIC = ["loss", "lr", "wd", "grad_norm", "ema_tau", "time/step_seconds", "time/data_seconds",
         "time/samples_per_second", "time/eta_seconds", "system/cpu_percent"]
REPRESENTATION = ["pred_target/mse", "pred_target/mae", "pred_target/cosine", "target/norm_mean", "target/norm_std",
                  "target/std_mean", "target/std_min", "target/std_l2n", "target/dead_dim_fraction", "pred/norm_mean",
                  "pred/std_mean", "pred/dead_dim_fraction", "mask/context_count", "mask/target_count",
                  "mask/context_ratio", "mask/target_ratio", "mask/overlap_fraction"]
EXPENSIVE = ["target/effective_rank", "target/token_effective_rank", "target/cov_offdiag_abs_mean",
             "pred/effective_rank", "ema/param_l2", "ema/relative_param_l2", "ema/target_grad_params",
             "health/grad_cosine_prev", "health/gns", "health/stable_rank_min", "health/weight_drift_max",
             "health/update_ratio", "knn/accuracy", "linear_probe/train_acc", "linear_probe/val_acc"]


def synthetic_rows(rows: int, seed: int = 0, start_step: int = 0, attempt: int = 1):
    """Yield `rows` realistic metric rows; halfway through, attempt 2 resumes 100 steps back."""
    rnd = random.Random(seed)
    step = start_step
    for index in range(rows):
        if index == rows // 2 and attempt == 1 and rows > 200:
            attempt, step = 2, step - 100
        row: dict = {"step": step, "attempt": attempt}
        for key in BASIC:
            row[key] = rnd.random()
        if step % 20 == 0:
            for key in REPRESENTATION:
                row[key] = rnd.random()
        if step % 500 == 0:
            for key in EXPENSIVE:
                row[key] = rnd.random() * 100
        if rnd.random() < 0.002:
            row["loss"] = rnd.choice(["NaN", "Infinity"])
        yield row
        if rnd.random() < 0.0005:
            yield {"step": step, "attempt": attempt, "event": "alert", "rule": "divergence", "severity": "warning",
                   "metric": "grad_norm", "value": rnd.random() * 50, "message": "grad_norm climbs: check the lr"}
        step += 1


def write_file(path: Path, rows: int, seed: int = 0) -> None:
    encoder = msgspec.json.Encoder()
    with open(path, "wb") as handle:
        batch: list[bytes] = []
        for row in synthetic_rows(rows, seed):
            batch.append(encoder.encode(row))
            if len(batch) >= 10_000:
                handle.write(b"\n".join(batch) + b"\n")
                batch.clear()
        if batch:
            handle.write(b"\n".join(batch) + b"\n")


def best_times(functions: dict, repeats: int) -> dict[str, tuple[float, float]]:
    """Best wall and best CPU seconds of `repeats` calls of each function. The calls alternate between the
    functions, so a burst of load from other processes on a shared machine does not favour either one."""
    walls: dict[str, list[float]] = {name: [] for name in functions}
    cpus: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(repeats):
        for name, function in functions.items():
            wall, cpu = time.perf_counter(), time.process_time()
            result = function()
            walls[name].append(time.perf_counter() - wall)
            cpus[name].append(time.process_time() - cpu)
            del result  # freed before the next call, so no reader runs with the other's result in memory
    return {name: (min(walls[name]), min(cpus[name])) for name in functions}


_MEMORY_PROBE = """
import sys, threading, time, psutil
import pandas as pd
from jepa_core.metrics.reader import read_metrics
from jepa_core.workbench.live import LiveRun
process = psutil.Process()
base = peak = process.memory_info().rss
done = threading.Event()
def sample():
    global peak
    while not done.is_set():
        peak = max(peak, process.memory_info().rss)
        time.sleep(0.005)
sampler = threading.Thread(target=sample)
sampler.start()
result = read_metrics(sys.argv[2]) if sys.argv[1] == "ours" else pd.read_json(sys.argv[2], lines=True)
done.set()
sampler.join()
peak = max(peak, process.memory_info().rss)
frame = result.scalars if sys.argv[1] == "ours" else result
print(peak - base, int(frame.memory_usage(deep=False).sum()))
"""


def peak_memory(reader: str, path: Path) -> tuple[int, int]:
    """(peak RSS growth, final frame bytes) of one read in a fresh child process."""
    out = subprocess.run([sys.executable, "-c", _MEMORY_PROBE, reader, str(path)], check=True,
                         capture_output=True, text=True).stdout.split()
    return int(out[0]), int(out[1])


def follower_costs(directory: Path, polls: int, rows_per_poll: int) -> list[tuple[float, int, float]]:
    """(file MiB before the poll, rows returned, CPU ms of the poll) while the file grows by a fixed amount."""
    path = directory / "live.jsonl"
    write_file(path, 200_000, seed=1)  # a long history the follower has already consumed
    follower = MetricsFollower(path)
    follower.poll()
    encoder = msgspec.json.Encoder()
    source = synthetic_rows(polls * rows_per_poll, seed=2, start_step=10**6, attempt=1)
    results = []
    for _ in range(polls):
        chunk = b"".join(encoder.encode(next(source)) + b"\n" for _ in range(rows_per_poll))
        with open(path, "ab") as handle:
            handle.write(chunk)
        size_mib = os.path.getsize(path) / 2**20
        cpu = time.process_time()
        got = follower.poll()
        results.append((size_mib, len(got), (time.process_time() - cpu) * 1000))
        # Grow the history between polls too, so later polls face a much bigger file.
        with open(path, "ab") as handle:
            handle.write(b"".join(encoder.encode(r) + b"\n" for r in synthetic_rows(20_000, seed=3)))
        follower.poll()
    return results


def follower_cost_by_new_rows(directory: Path, sizes: tuple[int, ...] = (100, 1_000, 10_000)) -> list[tuple[int, float]]:
    """(new rows, CPU ms of the poll that reads them) on one large file: cost grows with new bytes only."""
    path = directory / "live_sizes.jsonl"
    write_file(path, 200_000, seed=4)
    follower = MetricsFollower(path)
    follower.poll()
    encoder = msgspec.json.Encoder()
    results = []
    for count in sizes:
        with open(path, "ab") as handle:
            handle.write(b"".join(encoder.encode(r) + b"\n" for r in synthetic_rows(count, seed=5, start_step=10**7)))
        cpu = time.process_time()
        got = follower.poll()
        results.append((len(got), (time.process_time() - cpu) * 1000))
    return results


def live_poll_costs(directory: Path, histories: tuple[int, ...] = (10_000, 100_000, 300_000), polls: int = 10,
                    rows_per_poll: int = 200) -> list[tuple[int, float]]:
    """(rows already followed, median CPU ms of a LiveRun.poll that brings `rows_per_poll` new rows)."""
    encoder = msgspec.json.Encoder()
    results = []
    for history in histories:
        run = directory / f"live_run_{history}"
        run.mkdir()
        (run / "meta.json").write_text('{"status": "running"}')  # a live run: followed, not read once
        write_file(run / "metrics.jsonl", history, seed=1)
        live = LiveRun(run)
        source = synthetic_rows(polls * rows_per_poll, seed=2, start_step=10**7, attempt=3)
        costs = []
        for _ in range(polls):
            with open(run / "metrics.jsonl", "ab") as handle:
                handle.write(b"".join(encoder.encode(next(source)) + b"\n" for _ in range(rows_per_poll)))
            cpu = time.process_time()
            live.poll()
            costs.append((time.process_time() - cpu) * 1000)
        results.append((history, sorted(costs)[len(costs) // 2]))
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--follow-polls", type=int, default=8)
    parser.add_argument("--follow-rows", type=int, default=200)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        path = directory / "metrics.jsonl"
        write_file(path, args.rows)
        size_mib = path.stat().st_size / 2**20
        table = read_metrics(path)
        print(f"file: {args.rows:,} rows, {size_mib:.0f} MiB; read back {len(table.scalars):,} scalar rows x "
              f"{table.scalars.shape[1]} columns, {len(table.alerts)} alerts, {table.torn_lines} skipped lines")
        times = best_times({"ours": lambda: read_metrics(path), "pandas": lambda: pd.read_json(path, lines=True)},
                           args.repeats)
        (ours_wall, ours_cpu), (pandas_wall, pandas_cpu) = times["ours"], times["pandas"]
        ours_peak, ours_frame = peak_memory("ours", path)
        pandas_peak, pandas_frame = peak_memory("pandas", path)

        print()
        print(f"{'reader':<22}{'best wall s':>12}{'best CPU s':>12}{'rows/s (CPU)':>15}{'peak MiB':>10}"
              f"{'frame MiB':>11}{'peak/frame':>11}")
        for name, wall, cpu, peak, frame in (("jepa read_metrics", ours_wall, ours_cpu, ours_peak, ours_frame),
                                             ("pandas.read_json", pandas_wall, pandas_cpu, pandas_peak,
                                              pandas_frame)):
            print(f"{name:<22}{wall:>12.2f}{cpu:>12.2f}{args.rows / cpu:>15,.0f}{peak / 2**20:>10.0f}"
                  f"{frame / 2**20:>11.0f}{peak / max(frame, 1):>11.1f}")
        print(f"speed ratio (pandas / ours): CPU {pandas_cpu / ours_cpu:.1f}x, wall {pandas_wall / ours_wall:.1f}x; "
              f"peak memory ratio {pandas_peak / max(ours_peak, 1):.1f}x")

        print()
        print(f"follower: file grows by {args.follow_rows} rows per poll (+20,000 rows between polls)")
        print(f"{'poll':>5}{'file MiB':>10}{'rows':>7}{'CPU ms':>9}")
        costs = follower_costs(directory, args.follow_polls, args.follow_rows)
        for index, (mib, count, cpu_ms) in enumerate(costs, 1):
            print(f"{index:>5}{mib:>10.1f}{count:>7}{cpu_ms:>9.2f}")
        first, last = costs[0], costs[-1]
        growth = last[0] / first[0]
        print(f"file grew {growth:.1f}x; poll cost ratio last/first {last[2] / max(first[2], 1e-9):.2f}"
              f" (flat means cost tracks new bytes only)")
        print()
        print("follower on a 76 MiB file: one poll after appending N rows")
        print(f"{'new rows':>9}{'CPU ms':>9}{'us/row':>8}")
        for count, cpu_ms in follower_cost_by_new_rows(directory):
            print(f"{count:>9}{cpu_ms:>9.2f}{cpu_ms * 1000 / max(count, 1):>8.1f}")
        print()
        print("LiveRun.poll (the notebooks' table): 200 new rows a poll, median of 10 polls")
        print(f"{'rows followed':>14}{'CPU ms':>9}")
        for history, cpu_ms in live_poll_costs(directory):
            print(f"{history:>14,}{cpu_ms:>9.2f}")


if __name__ == "__main__":
    main()
