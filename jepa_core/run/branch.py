"""A branch of a run: a new run directory beside its parent that continues from one of the parent's checkpoints
with a few config changes (`jepa rewind`).

The branch holds the parent's resolved config plus the changes, a verified copy of the checkpoint (weights,
optimizer state, diagnostics state: the schedules are functions of the step), the parent's initial weights, the
parent's stream up to the branch step (so the rules, the charts and `jepa doctor` see the whole history) and
`meta.json` with the lineage. It continues at the next step with the parent's seed, so its batches and masks are
the parent's: the only difference is what was changed. Everything is checked before anything is created, and the
parent is only read, never written (not even its lock).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from jepa_core.alerts.windows import rewind_step_before, rule_window_steps
from jepa_core.common.atomic import write_json_atomic
from jepa_core.config import Config, ConfigError, apply_overrides, config_to_dict
from jepa_core.metrics.stream import JsonlWriter, iter_rows, stream_file
from jepa_core.run import status
from jepa_core.run.checkpoint import (
    INITIAL,
    LATEST,
    copy_checkpoint,
    list_checkpoints,
    read_digest,
    verify_checkpoint,
)
from jepa_core.run.rundir import RunPaths, create_run, load_run_config, refuse_taken_run
from jepa_core.run.validation import validate_config

# Changes that cannot apply to a running state: the weights' shapes, the optimizer's parameter groups, the data the
# held-out baselines were measured on, and where the branch lives.
FROZEN_SECTIONS = frozenset({"model"})
FROZEN_KEYS = frozenset({"faults.target_gradients", "logging.runs_dir", "logging.name"})
DATA_KEYS_THAT_MAY_CHANGE = frozenset({"data.num_workers", "data.prefetch_factor"})  # how batches are read, not what


@dataclass
class BranchPlan:
    """Everything `create_branch` will write, decided and checked while nothing exists yet."""

    parent: Path
    step: int
    checkpoint: Path | None  # None: from the parent's initial weights (step 0)
    cfg: Config
    changes: dict[str, Any]  # "section.key" -> the branch's value, only keys whose value differs
    root: Path
    why: str  # how the step was chosen, in words


def _flat(cfg: Config) -> dict[str, Any]:
    return {f"{section}.{key}": value for section, values in config_to_dict(cfg).items()
            for key, value in values.items()}


def _refuse_frozen(changes: dict[str, Any]) -> None:
    for key in changes:
        section = key.split(".", 1)[0]
        if section in FROZEN_SECTIONS or key in FROZEN_KEYS or (section == "data" and key not in
                                                                 DATA_KEYS_THAT_MAY_CHANGE):
            hint = " (name the branch with --name)" if key == "logging.name" else ""
            raise ConfigError(f"--set {key}: cannot change in a rewind: the branch continues the parent's state, "
                              f"which this key fixed{hint}; start a new run to change it")


def intact_checkpoints(parent: Path) -> dict[int, Path]:
    """step -> an intact checkpoint of the parent holding it (a step file before latest.pt)."""
    checkpoints = RunPaths(parent).checkpoints
    found: dict[int, Path] = {}
    candidates = [p for _, p in list_checkpoints(checkpoints)] + [checkpoints / LATEST]
    for path in candidates:
        if not path.is_file() or verify_checkpoint(path) is not None:
            continue
        step = (read_digest(path) or {}).get("step")
        if isinstance(step, int):
            found.setdefault(step, path)
    return found


def parent_alerts(parent: Path) -> list[dict]:
    return [row for row in iter_rows(stream_file(parent)) if row.get("event") == "alert"]


def alert_number(parent: Path, alert: Mapping[str, Any]) -> int:
    """The 1-based number (`--alert N`) of the parent's alert with `alert`'s step, rule and severity (a row of the
    workbench's alert table); ConfigError when the run has no such alert."""
    for number, row in enumerate(parent_alerts(parent), start=1):
        if all(str(row.get(k)) == str(alert.get(k)) for k in ("rule", "severity")) and \
                int(row["step"]) == int(alert.get("step", -1)):
            return number
    raise ConfigError(f"{parent} has no {alert.get('severity')} {alert.get('rule')} alert at step {alert.get('step')}")


def _step_of_alert(parent: Path, cfg: Config, number: int, intact: list[int]) -> tuple[int, str]:
    alerts = parent_alerts(parent)
    if not 1 <= number <= len(alerts):
        raise ConfigError(f"--alert {number}: {parent} has {len(alerts)} alert(s); number them from 1 "
                          "(jepa doctor lists them in order)")
    alert = alerts[number - 1]
    window = rule_window_steps(str(alert.get("rule")), cfg.rules, cfg.diagnostics, alert.get("metric"))
    step = rewind_step_before(int(alert["step"]), window, intact)
    what = f"alert {number} ({alert.get('rule')} {alert.get('severity')} at step {alert['step']})"
    if step is None:
        return 0, f"{what}: no intact checkpoint {window} steps (its window) before it, so the initial weights"
    return step, f"{what}: the newest intact checkpoint at least {window} steps (its window) before it"


def plan_branch(parent: Path, to_step: int | None = None, alert: int | None = None,
                overrides: list[str] = (), name: str | None = None) -> BranchPlan:
    """Check everything a rewind needs; nothing is written. ConfigError (naming the key, file or step) on bad input,
    FileExistsError when the branch's name is taken."""
    parent = Path(parent)
    if not RunPaths(parent).config.is_file():
        raise ConfigError(f"{parent}: no config.toml there (is it a run directory?)")
    if (to_step is None) == (alert is None):
        raise ConfigError("give exactly one of --to STEP and --alert N")
    base = load_run_config(parent)
    for item in overrides:
        key = item.split("=", 1)[0].strip()
        if key in ("logging.name", "logging.runs_dir"):
            _refuse_frozen({key: None})
    cfg = validate_config(apply_overrides(load_run_config(parent), list(overrides)))
    before = _flat(base)
    changes = {k: v for k, v in _flat(cfg).items() if before.get(k) != v}
    _refuse_frozen(changes)
    intact = intact_checkpoints(parent)
    if alert is not None:
        step, why = _step_of_alert(parent, base, alert, sorted(intact))
    else:
        step, why = to_step, f"--to {to_step}"
        if step != 0 and step not in intact:
            have = ", ".join(map(str, sorted(intact))) or "none"
            raise ConfigError(f"--to {step}: {parent} has no intact checkpoint of step {step} "
                              f"(intact checkpoints: {have}; 0 rewinds to the initial weights)")
    if step < 0:
        raise ConfigError(f"--to {step}: a step is 0 or more")
    if cfg.optim.steps <= step:
        raise ConfigError(f"optim.steps {cfg.optim.steps} leaves nothing to train after step {step} "
                          "(--set optim.steps=... to go further)")
    cfg.logging.runs_dir = str(parent.parent)
    cfg.logging.name = name or f"{parent.name}-from-{step}"
    root = refuse_taken_run(parent.parent, cfg.logging.name)
    return BranchPlan(parent, step, intact.get(step) if step else None, cfg, changes, root, why)


def create_branch(plan: BranchPlan) -> RunPaths:
    """Write the branch run directory of `plan` (removed again if any part of it fails); returns its paths, with
    status "stopped" at the branch step: `jepa train --resume` continues it."""
    paths, lock = create_run(plan.cfg, plan.cfg.logging.name)
    try:
        parent = RunPaths(plan.parent)
        if plan.checkpoint is not None:
            copy_checkpoint(plan.checkpoint, paths.checkpoints, f"step_{plan.step:07d}.pt")
            if (parent.checkpoints / INITIAL).is_file():
                copy_checkpoint(parent.checkpoints / INITIAL, paths.checkpoints)
            with JsonlWriter(paths.metrics, attempt=1) as writer:
                for row in iter_rows(stream_file(parent.root)):
                    if row["step"] <= plan.step:
                        writer.write({k: v for k, v in row.items() if k != "attempt"})
                writer.fsync()
            if parent.tensorboard.is_dir() and plan.cfg.logging.tensorboard:
                # the resumed trainer purges the parent's events after the branch step (TensorBoard's purge_step)
                shutil.copytree(parent.tensorboard, paths.tensorboard)
        write_json_atomic(paths.meta, {
            "name": paths.root.name, "status": status.STOPPED, "last_step": plan.step,
            "total_steps": plan.cfg.optim.steps,
            "parent": {"run": plan.parent.name, "path": str(plan.parent.resolve()), "step": plan.step,
                       "checkpoint": plan.checkpoint.name if plan.checkpoint else None,
                       "changes": plan.changes, "why": plan.why},
        })
    except BaseException:
        lock.release()
        shutil.rmtree(paths.root, ignore_errors=True)
        raise
    lock.release()
    return paths


def lineage(meta: dict[str, Any]) -> dict[str, Any] | None:
    """The `parent` record of a branch's meta.json, or None for a run that is not a branch."""
    parent = meta.get("parent")
    return parent if isinstance(parent, dict) and isinstance(parent.get("step"), int) else None


def branch_parent(root: Path, meta: dict[str, Any]) -> tuple[Path, int] | None:
    """(the parent's run directory, the branch step) of a branch whose parent is still there: the recorded path, else
    a sibling of that name (the runs folder was moved or copied whole); None for a run that is not a branch."""
    record = lineage(meta)
    if record is None:
        return None
    candidates = [Path(str(record.get("path", ""))), Path(root).parent / str(record.get("run", ""))]
    for path in candidates:
        if str(path) and RunPaths(path).config.is_file():
            return path, int(record["step"])
    return None
