"""The compact console line printed during headless training, e.g.

    step 120/1000 loss 0.4312 lr 8.1e-04 ema 0.9968 std 0.21 rank 31.2 6.3 it/s eta 2m20s

and `terminal_safe`, which every string from a run (names, alert messages, paths) passes through on its way to a
terminal (design §11).
"""

from __future__ import annotations

import math
import os
import re
import signal
import sys
from collections.abc import Callable, Mapping
from typing import Any

# (metric key, label, formatter) in display order; keys that are absent are skipped.
_FIELDS: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("loss", "loss", lambda v: f"{v:.4f}"),
    ("lr", "lr", lambda v: f"{v:.1e}"),
    ("ema_tau", "ema", lambda v: f"{v:.4f}"),
    ("grad_norm", "gnorm", lambda v: f"{v:.3g}"),
    ("target/std_mean", "std", lambda v: f"{v:.2f}"),
    ("target/effective_rank", "rank", lambda v: f"{v:.1f}"),
    ("mask/overlap_fraction", "leak", lambda v: f"{v:.2f}"),
    ("knn/accuracy", "knn", lambda v: f"{v:.3f}"),
    ("linear_probe/val_acc", "probe", lambda v: f"{v:.3f}"),
)


# C0 controls, DEL and C1 controls (ESC and CSI start the sequences that retitle, clear or reprogram a terminal;
# CR and BS overwrite what was printed), the Unicode line and paragraph separators, and the bidirectional
# overrides and isolates that make a terminal show text in another order than it is; lone surrogates (valid in a
# JSON string) cannot be encoded for a UTF-8 terminal at all.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                     "\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}")


def terminal_safe(text: str) -> str:
    """`text` with every control character shown as a visible escape (`\\x1b`, `\\n`, `\\u202e`), so that a
    string from a metrics file or a run directory cannot move the cursor, clear or retitle the terminal, or
    break one printed line into two. Printable text, backslashes included, is left as it is."""
    return _UNSAFE.sub(_escape, text)


def json_terminal_safe(json_text: str) -> str:
    """Strict JSON text with the characters `terminal_safe` escapes written as `\\uXXXX` escapes. A JSON encoder
    must escape C0 controls only; the rest may appear raw inside strings, and only there, so this keeps the JSON
    valid and equal in meaning."""
    return _UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", json_text)


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if hasattr(value, "item"):  # tensors, numpy scalars
        value = value.item()
    try:
        return float(value)  # also accepts the stream's "NaN" / "Infinity" strings
    except (TypeError, ValueError):
        return None


def _fmt(value: float, formatter: Callable[[float], str]) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return formatter(value)


def format_duration(seconds: float | None) -> str:
    """Short human duration: 42s, 2m20s, 1h05m, 3d04h; '--' for unknown, negative or non-finite input."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "--"
    total = int(round(seconds))
    if total < 60:
        return f"{total}s"
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def format_console_line(step: int, total_steps: int | None, metrics: Mapping[str, Any]) -> str:
    """One compact line with whichever known metrics are present; throughput and ETA from the timing metrics."""
    parts = [f"step {step}/{total_steps}" if total_steps else f"step {step}"]
    for key, label, formatter in _FIELDS:
        value = _as_float(metrics.get(key))
        if value is not None:
            parts.append(f"{label} {_fmt(value, formatter)}")
    step_seconds = _as_float(metrics.get("time/step_seconds"))
    if step_seconds is not None and math.isfinite(step_seconds) and step_seconds > 0:
        rate = 1.0 / step_seconds
        parts.append(f"{rate:.1f} it/s" if rate >= 1 else f"{step_seconds:.2f} s/it")
    eta = _as_float(metrics.get("time/eta_seconds"))
    if eta is None and step_seconds is not None and total_steps:
        eta = max(total_steps - step, 0) * step_seconds
    if eta is not None:
        parts.append(f"eta {format_duration(eta)}")
    return " ".join(parts)


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
