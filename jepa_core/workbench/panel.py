"""What the train notebook draws from a session: the progress panel (HTML) and the mask overlay (PNG)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jepa_core.common.console import format_duration
from jepa_core.workbench.charts import safe_text

if TYPE_CHECKING:
    from jepa_core.workbench.view import SessionView


def progress_html(step: int, total: int, eta_seconds: float | None, status: str, phase: str = "") -> str:
    """A progress bar with the run's step, ETA, status word and what it is doing now; strings are escaped."""
    total = max(int(total), 1)
    step = min(max(int(step), 0), total)
    percent = 100.0 * step / total
    doing = f" ({safe_text(phase)})" if phase else ""
    return (
        f'<div class="jepa-progress" data-status="{safe_text(status)}">'
        f'<progress value="{step}" max="{total}" style="width: 60%"></progress> '
        f'<span class="jepa-step">step {step} / {total}</span> ({percent:.0f}%), '
        f'ETA {format_duration(eta_seconds)}, <b class="jepa-status">{safe_text(status)}</b>'
        f'<span class="jepa-phase">{doing}</span></div>'
    )


def session_panel_html(view: SessionView) -> str:
    """The session's progress bar (none while idle: there is no run to measure), what it is doing when that is not
    plain training ("building data", "evaluating step 0": the bar's "step k / N" says the rest) and its message."""
    message = f'<div class="jepa-message">{safe_text(view.message)}</div>' if view.message else ""
    if view.idle:
        return f'<div class="jepa-progress" data-status="idle"><b class="jepa-status">idle</b></div>{message}'
    bar = progress_html(view.step, view.total, view.eta_seconds, view.status,
                        "" if view.phase == "training" else view.phase)
    where = f'<div class="jepa-run-dir">run directory: {safe_text(view.run_dir)}</div>' if view.run_dir else ""
    return bar + message + where


def mask_overlay_png(batch: tuple[Any, Any], patch_size: int, count: int = 4) -> bytes:
    """PNG of context (visible) and target blocks over the images of one batch: `(uint8 images, MaskBatch)`, the
    pair read in one go from `Trainer.last_batch`, so the masks belong to those images."""
    from PIL import Image

    from jepa_core.metrics.artifacts import mask_overlay_grid

    images, masks = batch
    grid = mask_overlay_grid(images, masks.context_idx, masks.target_idx, int(patch_size), max_images=count)
    buffer = io.BytesIO()
    Image.fromarray(grid).save(buffer, format="PNG")
    return buffer.getvalue()


def latest_mask_artifact(run_dir: str | Path | None) -> bytes | None:
    """The newest mask PNG in `run_dir/artifacts` (a detached run's), or None."""
    if run_dir is None:
        return None
    pngs = sorted(Path(run_dir, "artifacts").glob("*mask*.png"), key=lambda p: p.stat().st_mtime)
    return pngs[-1].read_bytes() if pngs else None
