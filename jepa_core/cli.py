"""`jepa` command: train, check, doctor, report. Each subcommand lives in its own module; this only dispatches."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

USAGE = """usage: jepa <command> [options]

commands:
  train    train headless and write a run directory      (jepa train --help)
  check    pre-flight a run without training it           (jepa check [--config FILE] [--set ...])
  doctor   health verdict and alerts of a run             (jepa doctor RUN [--json])
  report   export a run's read-only HTML report           (jepa report RUN -o FILE.html [--offline])
"""

# What a shell reports for a command killed by SIGPIPE (128 + 13): `jepa doctor RUN | head -1` ends as `yes | head`
# does. Python ignores SIGPIPE and raises BrokenPipeError instead, so the code is set by hand.
EXIT_BROKEN_PIPE = 128 + getattr(signal, "SIGPIPE", 13)


def exit_quietly_on_broken_pipe(command: Callable[[], int]) -> int:
    """Run `command`; when the reader of stdout goes away (`| head`), end quietly with EXIT_BROKEN_PIPE.

    stdout is flushed here, inside the try: otherwise the last buffered lines would fail at interpreter exit, where
    Python prints "Exception ignored ... BrokenPipeError" and exits 120. After the failure stdout (and stderr, which
    `2>&1 | head` sends to the same closed pipe) point at /dev/null, so the flush at exit has nowhere to fail.
    """
    try:
        try:
            return command()
        finally:  # also after argparse's SystemExit (--help piped into head)
            sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        for stream in (sys.stdout, sys.stderr):
            try:
                os.dup2(devnull, stream.fileno())
            except (OSError, ValueError, AttributeError):  # a captured stream (pytest, notebook) has no real fd
                continue
        os.close(devnull)
        return EXIT_BROKEN_PIPE


def _dispatch(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "train":
        from jepa_core.train_cli import main as train_main

        return train_main(rest)
    if command == "check":
        from jepa_core.check import check_main

        return check_main(rest)
    if command == "doctor":
        from jepa_core.doctor import doctor_main

        return doctor_main(rest)
    if command == "report":
        from jepa_core.report import report_main

        return report_main(rest)
    print(f"jepa: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    return exit_quietly_on_broken_pipe(lambda: _dispatch(args))


if __name__ == "__main__":
    sys.exit(main())
