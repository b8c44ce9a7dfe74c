"""The detection library: recorded runs that the early-warning rules are tuned on and tested on (design §7, §8).

Settings of five seeds each, healthy (and more seeds of most, from later rounds); for each §8 fault a grid of
magnitudes x onsets (early, middle, late) on the settings that have onsets. Recorded in rounds; the rounds since the
rules last changed are the test split (cases.py holds the faults and the cases, rounds.py the rounds, library_settings.py
the settings). A fault run is branched from its healthy run at the onset's checkpoint: batches, masks and schedules are
pure functions of the step, so up to the onset it is the healthy run, bit for bit, and only the steps after the onset
cost anything to train. Each case is thinned (metric rows only, no run-time noise, six significant digits) into
research/data/library/<setting>/<case>/metrics.jsonl.gz with its config.toml; each setting's `cases.json` holds the
facts of every case recorded under it (fault, onset, split, round, status). The stream is gzipped (a sixth of its size;
`jepa doctor` reads it as it is) so that the library can keep growing inside the repository's 30 MiB.

    python research/library.py --list                 # what is recorded, what is missing
    python research/library.py --train --jobs 2       # train what is missing; resumable, one thread per job
    python research/library.py --train --only 'calib/*'

Training is resumable at two levels: a recorded case is never trained again, and a run left half-done in the work
directory (killed, machine gone) resumes from its newest checkpoint. More jobs on more cores: `--jobs 16`.
"""

from __future__ import annotations

import argparse
import fcntl
import fnmatch
import gzip
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

# What the library holds (settings, faults, rounds, cases) is cases.py, rounds.py and library_settings.py, beside
# this file, however this one is loaded; their names are the library's too.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import (EXTRA_CELLS, FAULTS, FIRST_TEST_ROUND, ROUND_HEALTHY_SETTINGS,  # noqa: E402, F401
                   ROUND_SEED_SETTINGS, ROUND_SEEDS, SEEDS, SETTING, SETTINGS, STUDY_ROUNDS, TEST_ROUND, Case,
                   Setting, all_cases, grid_cells, round_cases, study_cases)

REPO = Path(__file__).resolve().parent.parent
LIBRARY = REPO / "research" / "data" / "library"
WORK = REPO / "runs" / "library-work"

# Every library run: one thread (jobs run side by side), no tensorboard, no PNGs, every checkpoint kept to branch from.
RUN_OVERRIDES = ("runtime.num_threads=1", "runtime.device='cpu'", "logging.tensorboard=false",
                 "logging.progress_bar=false", "logging.keep_checkpoints=0", "eval.artifacts=false")
RECORD_STREAM = "metrics.jsonl.gz"  # a record's rows: gzip, level 9, no timestamp (the same rows, the same bytes)
# Per setting, the facts of each recorded case by its name: one file, not one per case (a file costs a 4 KiB block on
# disk, so 2,689 case files of 180 bytes took 10.5 MB of the checkout's 47).
CASES_INDEX = "cases.json"
POLL_SECONDS = 2.0  # how often the scheduler looks at its training processes
DROPPED_PREFIXES = ("time/", "system/", "memory/")  # machine noise, not training
# Facts the config and the other metrics already hold, which nothing reads (not the benchmark, not `jepa doctor`):
# the batch size, the epoch (step x batch / images), the mask sizes (the ratios x the tokens), and the lr and weight
# decay (pure functions of the step and the config). Dropped from every record since round 16 (2.5 of the 30 MiB
# the library may take), from the records before it too.
DERIVED_KEYS = frozenset({"global_batch_size", "epoch", "mask/context_count", "mask/target_count", "lr", "wd"})
# Kept to the last digit (the rest is thinned to six): the frozen-target test and rule compare fixed-batch readings
# for equality, as a live run does, and read at the fixed batch's own cadence of 20 steps, six digits made a healthy
# target near the end of its EMA schedule look frozen. Records made before round 9 carry six digits here too.
EXACT_KEYS = frozenset({"target/fixed_batch_std_mean", "target/fixed_batch_norm_mean", "ema/fixed_batch_distance"})
# What the harm labels and the baselines of research/detection.py read; with every rule's metrics, all that the
# benchmark reads of a stream.
LABEL_KEYS = frozenset({"loss", "grad_norm", "mask/overlap_fraction", "ema/target_grad_params",
                        "ema/relative_param_l2", "ema/fixed_batch_distance", "target/fixed_batch_std_mean",
                        "knn/accuracy", "linear_probe/val_acc", "target/effective_rank", "target/std_mean"})


# ------------------------------------------------------------------------------------------------------- records


def record_dir(case: Case) -> Path:
    return LIBRARY / case.setting / case.name


def read_index(setting_dir: Path) -> dict[str, dict]:
    """The facts of every case recorded under `setting_dir`, by the case's name ({} where none is)."""
    path = setting_dir / CASES_INDEX
    return json.loads(path.read_text()) if path.is_file() else {}


@contextmanager
def _index_update(setting_dir: Path):
    """Yield a setting's index to change in place; written back whole (atomically) under a lock, so that two
    schedulers recording side by side never lose each other's cases."""
    lock = Path(tempfile.gettempdir()) / "jepa-library-index.lock"
    with lock.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        index = read_index(setting_dir)
        yield index
        tmp = setting_dir / (CASES_INDEX + ".tmp")
        tmp.write_text(json.dumps(dict(sorted(index.items())), indent=1) + "\n")
        tmp.replace(setting_dir / CASES_INDEX)


def recorded_cases(root: Path) -> list[Path]:
    """The directory of every case recorded under `root` (a library): named in its setting's index, stream present."""
    return sorted(index_path.parent / name for index_path in root.glob(f"*/{CASES_INDEX}")
                  for name in read_index(index_path.parent) if (index_path.parent / name / RECORD_STREAM).is_file())


def is_recorded(case: Case) -> bool:
    return case.name in read_index(LIBRARY / case.setting) and (record_dir(case) / RECORD_STREAM).is_file()


def _thin_value(key: str, value):
    if isinstance(value, float) and math.isfinite(value) and key not in EXACT_KEYS:
        return float(f"{value:.6g}")
    return value


def read_keys() -> frozenset[str]:
    """Every metric the detection benchmark reads of a stream (the rules', under the default config, and the labels')
    and the key metrics of `jepa doctor`'s table."""
    from jepa_core.alerts.rules import build_rules  # noqa: PLC0415 (keeps --list free of torch)
    from jepa_core.config import RulesConfig  # noqa: PLC0415
    from jepa_core.metrics import registry  # noqa: PLC0415

    watched = LABEL_KEYS.union(*(rule.watches for rule in build_rules(RulesConfig())))
    return frozenset(watched | set(registry.shown_in("doctor")))


def thin_rows(rows: list[dict], onset: int | None, keys: frozenset[str]) -> list[dict]:
    """A case's metric rows as the library keeps them: no run-time noise, no derived facts, six digits, and for a
    fault run, up to its onset, only the metrics the benchmark and doctor read (`keys`) and the run facts. Up to the
    onset a fault run is its healthy run bit for bit, and the library holds that one whole: the fault run's record
    stays one stream that `jepa doctor` reads alone and the rules judge exactly as the whole one, at about half the
    size."""
    kept = []
    for row in rows:
        if "event" in row:
            continue
        if onset is not None and row["step"] <= onset:
            row = {k: v for k, v in row.items() if k in ("step", "attempt") or k in keys or k.startswith("params/")}
            if len(row) <= 2:
                continue
        kept.append({k: _thin_value(k, v) for k, v in row.items()
                     if not k.startswith(DROPPED_PREFIXES) and k not in DERIVED_KEYS})
    return kept


def write_thinned(rows: list[dict], onset: int | None, path: Path) -> None:
    """`rows` thinned (`thin_rows`) into a gzipped stream at `path`: level 9, mtime 0 (the same rows, the same bytes)."""
    from jepa_core.metrics.stream import encode_row  # noqa: PLC0415 (keeps --list free of torch)

    text = "".join(encode_row(row) + "\n" for row in thin_rows(rows, onset, read_keys()))
    path.write_bytes(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0))


def record(case: Case, run_dir: Path) -> Path:
    """Thin a finished work run into the library: metric rows only (rules are re-derived at replay)."""
    from jepa_core.metrics.stream import iter_rows  # noqa: PLC0415 (keeps --list free of torch)

    dest = record_dir(case)
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write_thinned(list(iter_rows(run_dir / "metrics.jsonl")), case.onset, tmp / RECORD_STREAM)
    config = [('runs_dir = "runs"' if ln.startswith("runs_dir = ") else ln)
              for ln in (run_dir / "config.toml").read_text().splitlines()]
    (tmp / "config.toml").write_text("\n".join(config) + "\n")
    meta = json.loads((run_dir / "meta.json").read_text())
    info = {"setting": case.setting, "seed": case.seed, "fault": case.fault, "magnitude": case.magnitude,
            "onset": case.onset, "until": case.until(), "status": meta.get("status"),
            "last_step": meta.get("last_step"), "split": case.split, "round": case.round}
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    with _index_update(dest.parent) as index:  # last: a case is recorded once its facts are in the index
        index[case.name] = info
    return dest


def resplit(root: Path | None = None) -> list[str]:
    """Rewrite the split and round of each recorded case that cases.py now places elsewhere (after a rule change
    moves FIRST_TEST_ROUND) in its setting's index; the streams are untouched. The keys of the cases rewritten."""
    changed = []
    for index_path in sorted((root or LIBRARY).glob(f"*/{CASES_INDEX}")):
        with _index_update(index_path.parent) as index:
            for name, info in sorted(index.items()):
                case = Case(info["setting"], info["seed"])
                if (info.get("split"), info.get("round")) != (case.split, case.round):
                    info.update(split=case.split, round=case.round)
                    changed.append(f"{info['setting']}/{name}")
    return changed


def load_case(case_dir: Path) -> tuple[dict, list[dict]]:
    """(the case's facts from its setting's index, metric rows) of one recorded case."""
    from jepa_core.metrics.stream import iter_rows  # noqa: PLC0415

    info = read_index(case_dir.parent).get(case_dir.name)
    if info is None:
        raise FileNotFoundError(f"{case_dir}: not recorded ({case_dir.parent / CASES_INDEX} does not name it)")
    return info, [r for r in iter_rows(case_dir / RECORD_STREAM) if "event" not in r]


# ------------------------------------------------------------------------------------------------------ training


def _work_dir(case: Case) -> Path:
    return WORK / case.setting / case.name


def _status(run_dir: Path) -> str | None:
    try:
        return json.loads((run_dir / "meta.json").read_text()).get("status")
    except (OSError, ValueError):
        return None


def _branch(case: Case) -> Path:
    """A fault run's directory: its parent's run up to the onset (stream, config, the onset's checkpoint), with the
    fault written into the config, so that resuming it trains the fault from the onset on. Written by a fresh
    interpreter: the parent's config.toml is then loaded by the code on disk, not by this scheduler's import of it,
    which a config key added while it runs (a new rule's threshold) made refuse every parent trained since."""
    parent, run = _work_dir(case.parent), _work_dir(case)
    ckpt = parent / "checkpoints" / f"step_{case.onset:07d}.pt"
    if not ckpt.is_file():
        raise FileNotFoundError(f"{case.key}: the healthy run has no checkpoint at the onset ({ckpt})")
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--branch", str(parent), str(run),
                           str(case.onset), case.name, *case.fault_overrides()],
                          capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise ValueError(f"{case.key}: branching from {parent} failed: {last}")
    return run


def write_branch(parent: Path, run: Path, onset: int, name: str, overrides: list[str]) -> None:
    """`_branch`'s work, in the process that runs `library.py --branch`."""
    from jepa_core.config import apply_overrides, load_config, save_config  # noqa: PLC0415

    ckpt = parent / "checkpoints" / f"step_{onset:07d}.pt"
    tmp = run.with_name(run.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "checkpoints").mkdir(parents=True)
    shutil.copy2(parent / "metrics.jsonl", tmp / "metrics.jsonl")
    meta = json.loads((parent / "meta.json").read_text())
    (tmp / "meta.json").write_text(json.dumps({**meta, "status": "stopped", "last_step": onset}))
    for name_ in ("init.pt", ckpt.name, ckpt.name + ".digest"):
        shutil.copy2(parent / "checkpoints" / name_, tmp / "checkpoints" / name_)
    cfg = apply_overrides(load_config(parent / "config.toml"), overrides)
    cfg.logging.name = name
    save_config(cfg, tmp / "config.toml")
    if cfg.faults.target_gradients:
        _add_target_params_to_optimizer(cfg, tmp / "checkpoints", onset)
    shutil.rmtree(run, ignore_errors=True)
    tmp.rename(run)


def _add_target_params_to_optimizer(cfg, checkpoints: Path, step: int) -> None:
    """With faults.target_gradients the trainer puts the target encoder's parameters in the optimizer from step 0
    (appended to the decay group, so a resume keeps one layout); a healthy checkpoint lacks them. Re-index its
    optimizer state to that layout (the target parameters start without Adam state, as they would at the onset)."""
    from jepa_core.run.checkpoint import load_checkpoint, save_checkpoint  # noqa: PLC0415
    from jepa_core.method.model import build_jepa  # noqa: PLC0415

    model = build_jepa(cfg.model, cfg.runtime.seed)
    extra = len(list(model.target_encoder.parameters()))
    path = checkpoints / f"step_{step:07d}.pt"
    state = load_checkpoint(path)
    optimizer = state["optimizer"]
    decay, no_decay = optimizer["param_groups"]
    first_vector = len(decay["params"])  # the ids of the no-decay group start here and move up by `extra`
    decay["params"] = list(range(first_vector + extra))
    no_decay["params"] = [i + extra for i in no_decay["params"]]
    optimizer["state"] = {(i + extra if i >= first_vector else i): v for i, v in optimizer["state"].items()}
    for stale in checkpoints.glob("*.pt*"):
        if stale.name != "init.pt":
            stale.unlink()
    save_checkpoint(checkpoints, step, state)


def command(case: Case) -> tuple[list[str], Path]:
    """The training command for a case (a fresh run, a branch, or the resume of either), and its run directory."""
    base = [sys.executable, "-m", "jepa_core.train", "--quiet", "--until", str(case.until())]
    run = _work_dir(case)
    if (run / "config.toml").is_file():
        return [*base, "--resume", str(run)], run
    if case.fault is not None:
        return [*base, "--resume", str(_branch(case))], run
    # A run killed before it wrote its config left nothing to resume, and its directory would refuse a fresh start.
    shutil.rmtree(run, ignore_errors=True)
    run.parent.mkdir(parents=True, exist_ok=True)
    cmd = [*base, "--name", case.name, "--set", f"logging.runs_dir={json.dumps(str(run.parent))}",
           "--set", f"runtime.seed={case.seed}", "--set", f"optim.steps={SETTING[case.setting].steps}"]
    for item in (*SETTING[case.setting].overrides, *RUN_OVERRIDES):
        cmd += ["--set", item]
    return cmd, run


def _done(run: Path, case: Case) -> bool:
    status = _status(run)
    if status in ("finished", "diverged"):
        return True
    try:
        return status == "stopped" and json.loads((run / "meta.json").read_text()).get("last_step") == case.until()
    except (OSError, ValueError):
        return False


def train(cases: list[Case], jobs: int) -> list[str]:
    """Train every case not yet recorded, `jobs` at a time, parents before their branches. Returns failures."""
    # A branch needs its parent's checkpoints in the work directory, which a fresh machine lacks: the parent is
    # trained again there (deterministic: the same run, recorded again unchanged).
    needed = {c.parent for c in cases if c.parent is not None and not is_recorded(c) and not _parent_ready(c.parent)}
    pending = [c for c in cases if not is_recorded(c) or c in needed]
    running: dict[subprocess.Popen, tuple[Case, Path, float]] = {}
    failures: list[str] = []
    blocked: set[str] = set()
    print(f"{len(pending)} cases to train, {jobs} at a time; work in {WORK}", flush=True)
    while pending or running:
        for proc in [p for p in running if p.poll() is not None]:
            case, run, began = running.pop(proc)
            if _done(run, case):
                record(case, run)
                print(f"  recorded {case.key} ({_status(run)}, {time.time() - began:.0f} s)", flush=True)
            elif _held(run):  # another scheduler started it first: it is theirs to finish, ours to record
                pending.insert(0, case)
            else:
                failures.append(case.key)
                blocked.add(case.key)
                print(f"  FAILED {case.key} (exit {proc.returncode}); see {run.parent / (case.name + '.log')}",
                      flush=True)
        busy = {c.key for c, _, _ in running.values()}
        for case in list(pending):
            run = _work_dir(case)
            if _held(run):  # another scheduler trains it: wait, then record it here
                continue
            if _done(run, case):  # trained earlier, or by another scheduler
                pending.remove(case)
                record(case, run)
                print(f"  recorded {case.key} (trained earlier)", flush=True)
                continue
            if len(running) >= jobs:
                continue
            parent = case.parent
            if parent is not None and parent.key in blocked:
                pending.remove(case)
                blocked.add(case.key)
                failures.append(f"{case.key} (parent failed)")
                continue
            if parent is not None and (parent.key in busy or not _parent_ready(parent)):
                continue
            pending.remove(case)
            try:
                cmd, run = command(case)
            except (OSError, ValueError) as exc:  # e.g. a parent run without the onset's checkpoint
                failures.append(f"{case.key} ({exc})")
                blocked.add(case.key)
                continue
            log = run.parent / f"{case.name}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            with log.open("a") as fh:
                proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=REPO,
                                        env={**os.environ, "OMP_NUM_THREADS": "1"})
            running[proc] = (case, run, time.time())
            busy.add(case.key)
        if running or any(_held(_work_dir(c)) for c in pending):
            time.sleep(POLL_SECONDS)
        elif pending:  # nothing can start: every remaining case waits on a parent that is missing
            for case in pending:
                failures.append(f"{case.key} (no parent run)")
            break
    return failures


def _parent_ready(parent: Case) -> bool:
    run = _work_dir(parent)
    return not _held(run) and _done(run, parent)


def _held(run: Path) -> bool:
    from jepa_core.run.lock import lock_holder  # noqa: PLC0415

    return run.is_dir() and lock_holder(run) is not None


def select(patterns: list[str] | None) -> list[Case]:
    cases = all_cases()
    if not patterns:
        return cases
    chosen = [c for c in cases if any(fnmatch.fnmatch(c.key, p) for p in patterns)]
    # A branch needs its parent's run (kept in the work directory, not in the library): schedule it too.
    needed = {c.parent for c in chosen if c.parent is not None and not _parent_ready(c.parent)}
    return [c for c in cases if c in chosen or c in needed]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train", action="store_true", help="train the cases not yet recorded")
    p.add_argument("--list", action="store_true", help="print every case and whether it is recorded")
    p.add_argument("--resplit", action="store_true", help="rewrite the recorded cases' split and round from cases.py")
    p.add_argument("--jobs", type=int, default=2, help="training processes at once, one thread each (default 2)")
    p.add_argument("--only", nargs="*", metavar="PATTERN", help="cases whose setting/name matches, e.g. 'calib/*'")
    p.add_argument("--branch", nargs="+", metavar="ARG", help=argparse.SUPPRESS)  # PARENT RUN ONSET NAME OVERRIDE...
    args = p.parse_args(argv)
    if args.branch:
        if len(args.branch) < 4:
            p.error("--branch needs PARENT RUN ONSET NAME [OVERRIDE ...]")
        parent, run, onset, name, *overrides = args.branch
        write_branch(Path(parent), Path(run), int(onset), name, overrides)
        return 0
    if args.jobs < 1:
        p.error("--jobs must be at least 1")
    if args.resplit:
        changed = resplit()
        print(f"{len(changed)} recorded cases moved: " + (", ".join(changed[:5]) + (" ..." if len(changed) > 5 else "")))
        return 0
    cases = select(args.only)
    if args.list or not args.train:
        for case in cases:
            print(f"{'recorded' if is_recorded(case) else 'missing ':9s} {case.split:5s} {case.key}")
        done = sum(map(is_recorded, cases))
        print(f"{done} of {len(cases)} recorded")
        return 0
    failures = train(cases, args.jobs)
    if failures:
        print("failed: " + ", ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
