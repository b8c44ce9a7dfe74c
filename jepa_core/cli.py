"""`jepa` command: train, check, doctor, report, rewind. Each subcommand lives in its own module; this only dispatches."""

from __future__ import annotations

import sys

from jepa_core.common.console import exit_quietly_on_broken_pipe

USAGE = """usage: jepa <command> [options]

commands:
  train    train headless and write a run directory      (jepa train --help)
  check    pre-flight a run without training it           (jepa check [--config FILE] [--set ...])
  doctor   health verdict and alerts of a run             (jepa doctor RUN [--json])
  report   export a run's read-only HTML report           (jepa report RUN -o FILE.html [--offline])
  rewind   branch a run from a checkpoint with changes    (jepa rewind RUN --to STEP|--alert N [--set ...])
"""

def _dispatch(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "train":
        from jepa_core.train import main as train_main

        return train_main(rest)
    if command == "check":
        from jepa_core.check import check_main

        return check_main(rest)
    if command == "doctor":
        from jepa_core.workbench.doctor import doctor_main

        return doctor_main(rest)
    if command == "report":
        from jepa_core.workbench.report import report_main

        return report_main(rest)
    if command == "rewind":
        from jepa_core.rewind import main as rewind_main

        return rewind_main(rest)
    print(f"jepa: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    return exit_quietly_on_broken_pipe(lambda: _dispatch(args))


if __name__ == "__main__":
    sys.exit(main())
