"""`jepa train` / `python -m jepa_core.train` / `torchrun -m jepa_core.train`: arguments, config, exit codes.

The config arguments (--config, --preset, --set) are shared with `jepa check`, so both read a config the same way.
"""

from __future__ import annotations

import argparse
import errno
import gc
import sys
from pathlib import Path

from jepa_core.common.console import terminal_safe
from jepa_core.config import Config, ConfigError, apply_overrides, load_config, preset
from jepa_core.data import DataError
from jepa_core.method.runtime import parse_profile_steps, set_thread_count
from jepa_core.metrics.sinks import MetricSinkError
from jepa_core.run import distributed
from jepa_core.run import status as run_status
from jepa_core.run.checkpoint import CheckpointError, list_checkpoints
from jepa_core.run.lock import RunLockedError
from jepa_core.run.rundir import load_run_config
from jepa_core.run.signals import GracefulStop
from jepa_core.run.trainer import Trainer
from jepa_core.run.validation import validate_config


def add_config_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path,
                   help="TOML config file (a top-level preset = 'tiny'|'tiny-real'|'small'|'base' picks the base)")
    p.add_argument("--preset", default=None,
                   help="start from a built-in preset: tiny (CPU), tiny-real (tiny for small real images), small or "
                        "base (GPU)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override one config value (TOML syntax), may repeat")


def build_parser(prog: str = "jepa train") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Train a JEPA model headless and write a run directory.")
    add_config_arguments(p)
    p.add_argument("--name", help="run name (directory under logging.runs_dir)")
    p.add_argument("--resume", type=Path, metavar="RUN_DIR", help="continue a run from its latest checkpoint")
    p.add_argument("--quiet", action="store_true", help="no progress bar or console lines")
    p.add_argument("--until", type=int, metavar="STEP", help="stop at this step as a signal would (final checkpoint, "
                   "status stopped); --resume goes on from there")
    p.add_argument("--profile-steps", metavar="A:B", help="write a torch.profiler trace of steps A to B (inclusive) "
                   "to RUN/traces/ (Chrome/Perfetto JSON: open it in https://ui.perfetto.dev or chrome://tracing)")
    return p


def config_from_args(args: argparse.Namespace) -> Config:
    if getattr(args, "resume", None) is not None:
        if not (args.resume / "config.toml").is_file():
            raise ConfigError(f"--resume {args.resume}: no config.toml there (is it a run directory?)")
        cfg = load_run_config(args.resume)
    elif args.config is not None:
        if args.preset:
            raise ConfigError("give either --config or --preset (a config file names its preset itself)")
        cfg = load_config(args.config)
    else:
        cfg = preset(args.preset or "tiny")
    apply_overrides(cfg, args.overrides)
    if getattr(args, "name", None):
        cfg.logging.name = args.name
    return validate_config(cfg)


# A disk that fills up or turns read-only mid-run: the run stops as `crashed`, every file consistent up to its last
# checkpoint, and the command says so in one line instead of a traceback with the "diverged" exit code.
DISK_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
EXIT_CRASHED = 3


def disk_full_words(trainer: Trainer, exc: OSError) -> str:
    where = exc.filename or trainer.paths.root
    kept = list_checkpoints(trainer.paths.checkpoints)
    intact = (f"its last checkpoint (step {kept[-1][0]})" if kept else "step 0 (no checkpoint was written)")
    return (f"crashed at step {trainer.step}: cannot write {where}: {exc.strerror or exc}. The run directory "
            f"{trainer.paths.root} is consistent up to {intact}; free some space (or make it writable), then "
            f"jepa train --resume {trainer.paths.root}")


def main(argv: list[str] | None = None) -> int:
    """`jepa train`: exit 0 finished, stopped (signal or control file) or stopped_on_alert; 1 diverged; 2 bad input
    or a run held by another writer; 3 crashed on a full or read-only disk. SIGTERM/SIGINT stop gracefully; a second
    signal ends the process at once."""
    args = build_parser().parse_args(argv)
    with GracefulStop() as stop:
        try:
            cfg = config_from_args(args)
            profile = parse_profile_steps(args.profile_steps) if args.profile_steps else None
            if args.until is not None and args.until < 1:
                raise ConfigError(f"--until must be a step of 1 or more, got {args.until}")
            distributed.init_if_needed(cfg.runtime.device)
            set_thread_count(cfg.runtime.num_threads)  # process-wide, so set here by the process, not the Trainer
            trainer = Trainer(cfg, run_dir=args.resume, resume=args.resume is not None, quiet=args.quiet,
                              profile_steps=profile)
        except (ConfigError, DataError, CheckpointError, FileExistsError, RunLockedError) as exc:
            print(f"error: {terminal_safe(str(exc))}", file=sys.stderr)
            return 2
        max_steps = None if args.until is None else max(0, args.until - trainer.step)
        try:
            status = trainer.run(stop_event=stop, max_steps=max_steps)
            if status == run_status.PAUSED:  # reached --until before the configured end
                status = trainer.end(run_status.STOPPED)
        except (OSError, MetricSinkError) as exc:
            disk = exc if isinstance(exc, OSError) else exc.__cause__
            if not isinstance(disk, OSError) or disk.errno not in DISK_ERRORS:
                raise
            print(f"error: {terminal_safe(disk_full_words(trainer, disk))}", file=sys.stderr)
            return EXIT_CRASHED
    if trainer.dist.is_main and not args.quiet:
        kept = f" (last finite state: step {trainer.step})" if status == run_status.DIVERGED else ""
        print(terminal_safe(f"{status} at step {trainer.last_step}{kept}: {trainer.paths.root}"))
    del trainer  # its DDP wrapper holds the process group; free it before the group goes
    gc.collect()
    distributed.shutdown()
    return 0 if status in run_status.EXIT_OK else 1


if __name__ == "__main__":
    sys.exit(main())
