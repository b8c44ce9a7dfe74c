"""The compact console line printed during headless training, e.g.

    step 120/1000 loss 0.4312 lr 8.1e-04 ema 0.9968 std 0.21 rank 31.2 6.3 it/s eta 2m20s
"""

from __future__ import annotations

import math
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
