"""`jepa rewind RUN --to STEP | --alert N [--set key=value ...] [--name NEW]`: branch a run from one of its
checkpoints with a few changes, then train the branch (`jepa_core.run.branch` makes it; `jepa train --resume`
continues it, so the exit codes are train's).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from jepa_core.common.console import terminal_safe
from jepa_core.config import ConfigError
from jepa_core.run.branch import create_branch, plan_branch
from jepa_core.run.checkpoint import CheckpointError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jepa rewind", description=(
        "Branch RUN from one of its checkpoints into a new run beside it (default name RUN-from-STEP) with the "
        "changes given by --set, then train the branch. The parent is never written to."))
    p.add_argument("run", type=Path, metavar="RUN", help="the parent run directory")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--to", type=int, metavar="STEP", help="a step with an intact checkpoint (0: the initial "
                       "weights)")
    where.add_argument("--alert", type=int, metavar="N", help="the N-th alert of the run (as jepa doctor lists them): "
                       "the newest intact checkpoint at least one of that rule's windows before it")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="change one config value for the branch (TOML syntax), may repeat")
    p.add_argument("--name", help="the branch's run name (default RUN-from-STEP)")
    p.add_argument("--no-train", action="store_true", help="only create the branch; continue it later with "
                   "jepa train --resume BRANCH")
    p.add_argument("--until", type=int, metavar="STEP", help="train the branch up to this step (as jepa train)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or console lines")
    return p


def main(argv: list[str] | None = None) -> int:
    """Exit 2 on bad input (nothing created); otherwise `jepa train --resume`'s exit code (0 with --no-train)."""
    args = build_parser().parse_args(argv)
    try:
        plan = plan_branch(args.run, args.to, args.alert, args.overrides, args.name)
        paths = create_branch(plan)
    except (ConfigError, CheckpointError, FileExistsError, OSError) as exc:
        print(f"error: {terminal_safe(str(exc))}", file=sys.stderr)
        return 2
    changed = ", ".join(f"{k}={v!r}" for k, v in plan.changes.items()) or "no config changes"
    print(terminal_safe(f"branched {paths.root} from {plan.parent} at step {plan.step} ({plan.why}); {changed}"),
          file=sys.stderr)
    if args.no_train:
        print(terminal_safe(f"continue it with: jepa train --resume {paths.root}"))
        return 0
    from jepa_core.train import main as train_main

    rest = ["--resume", str(paths.root)] + (["--quiet"] if args.quiet else []) + \
        ([f"--until={args.until}"] if args.until is not None else [])
    return train_main(rest)


if __name__ == "__main__":
    sys.exit(main())
