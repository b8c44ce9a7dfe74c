"""The workbench's small parts: markdown escaping, the form's plan, the progress panel, the mask overlay, the
throttled view publisher and how a detached run is asked to stop."""

from __future__ import annotations

import html as html_lib
import io
import json
import re
from pathlib import Path

import pytest
import torch
from PIL import Image

from jepa_core.config import CADENCE_KEYS, ConfigError, apply_overrides, preset
from jepa_core.method.masks import MaskBatch
from jepa_core.run.lock import RunLock
from jepa_core.workbench import detached, markup
from jepa_core.workbench.panel import latest_mask_artifact, mask_overlay_png, progress_html, session_panel_html
from jepa_core.workbench.plan import FORM_KEYS, PRESET_NAMES, form_defaults, form_overrides, plan_from_form
from jepa_core.workbench.view import IDLE, Publisher, SessionView
from browser_util import XSS, write_synthetic_run


def view(**fields) -> SessionView:
    base = dict(status="running", phase="training", message="", step=5, total=10, eta_seconds=65.0,
                mode="in-process", run_dir=None, busy=True, rows=1, epoch=1)
    return SessionView(**{**base, **fields})


def render(markdown_text: str) -> str:
    """What mo.md makes of a markdown string (its HTML)."""
    import marimo as mo

    return mo.md(markdown_text).text


@pytest.mark.parametrize("text", [
    "target = m*target + (1-m)*online",
    "a_b_c __init__ `x` [link](http://x) ~~del~~ ==mark== ^sup^ $x^2$ :smile: | pipe",
    "# heading\n- item\n1. first",
    XSS,
])
def test_md_text_renders_exactly_its_characters(text: str) -> None:
    rendered = render(f"- alert: {markup.md_text(text)}")
    for tag in ("<em>", "<strong>", "<code>", "<a ", "<del>", "<mark>", "<sup>", "<h1", "<img", "arithmatex"):
        assert tag not in rendered, (tag, rendered)
    plain = html_lib.unescape(re.sub(r"<[^>]+>", "", rendered)).strip()
    assert plain == "alert: " + text.replace("\n", " ")


def test_md_text_drops_controls_and_bidi_overrides() -> None:
    assert markup.md_text("a\x1b[31mb\u202ec\nd") == "a &#91;31mb c d"


def test_problems_markdown_names_each_file() -> None:
    assert markup.problems_markdown([]) == ""
    text = markup.problems_markdown(["runs/x/meta.json: malformed JSON at line 1: *oops*"])
    assert "meta&#46;json" in text and "*oops*" not in text


def test_plan_from_form_validates_and_keeps_overrides() -> None:
    plan = plan_from_form({"preset": "tiny", "data.dataset": "shapes", "data.path": "", "optim.lr": 2,
                           "logging.name": "r1"}, {"basic_every_steps": 5}, {"faults.frozen_target": True})
    assert plan.cfg.optim.lr == 2.0 and plan.cfg.diagnostics.basic_every_steps == 5
    assert plan.cfg.faults.frozen_target is True and plan.name == "r1"
    assert "logging.name=\"r1\"" in plan.overrides and all("logging.name" not in o for o in plan.cli_overrides())
    assert plan.cadences["basic_every_steps"] == 5
    assert plan.fresh_config() is not plan.cfg and plan.fresh_config() == plan.cfg
    threads = plan_from_form({"preset": "tiny", "runtime.num_threads": 1})  # the notebook's threads field
    assert threads.cfg.runtime.num_threads == 1 and "runtime.num_threads=1" in threads.cli_overrides()
    with pytest.raises(ConfigError, match="num_threads"):
        plan_from_form({"preset": "tiny", "runtime.num_threads": -1})
    with pytest.raises(ConfigError, match="optim.batch_size"):
        plan_from_form({"preset": "tiny", "optim.batch_size": 0})


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_an_untouched_form_is_the_preset_as_shipped(name: str) -> None:
    # Every field starts from the chosen preset's value (once tiny's values sat under every preset: `small` got
    # tiny's steps, batch, lr and images), and so do the cadence sliders.
    cfg = preset(name)
    cadences = {k: getattr(cfg.diagnostics, k) for k in CADENCE_KEYS}
    plan = plan_from_form({"preset": name, **form_defaults(name)}, cadences)
    for section in ("model", "data", "masks", "optim", "ema", "diagnostics", "eval", "runtime", "logging"):
        assert getattr(plan.cfg, section) == getattr(cfg, section), section
    assert set(form_defaults(name)) == set(FORM_KEYS)


def test_form_overrides_are_valid_toml_for_apply_overrides() -> None:
    values = {"optim.lr": 0.002, "data.dataset": "shapes", "masks.target_scale": (0.1, 0.2),
              "faults.frozen_target": True, "diagnostics.eval_every_steps": 50}
    cfg = apply_overrides(preset("tiny"), form_overrides(values))
    assert cfg.optim.lr == 0.002 and cfg.masks.target_scale == [0.1, 0.2]
    assert cfg.faults.frozen_target is True and cfg.diagnostics.eval_every_steps == 50
    with pytest.raises(ValueError, match="'lr'"):
        form_overrides({"lr": 1.0})


def test_progress_panel_escapes_and_shows_no_bar_while_idle() -> None:
    html = progress_html(5, 10, 65.0, XSS, "evaluating step 5")
    assert "<img" not in html and "step 5 / 10" in html and "ETA 1m05s" in html and "evaluating step 5" in html
    idle = session_panel_html(view(status=IDLE, phase="", step=0, total=0, busy=False, message="No run yet."))
    assert "<progress" not in idle
    assert "step 0" not in idle and "No run yet." in idle
    training = session_panel_html(view(message=XSS, run_dir=Path("/tmp/r")))
    assert "step 5 / 10" in training and "<img" not in training and "/tmp/r" in training
    assert "(building data)" in session_panel_html(view(phase="building data", step=0))


def test_mask_overlay_draws_one_batch_and_falls_back_to_artifacts(tmp_path: Path) -> None:
    images = torch.randint(0, 255, (6, 3, 16, 16), dtype=torch.uint8)
    masks = MaskBatch(context_idx=torch.arange(8).repeat(6, 1),
                      target_idx=torch.arange(12, 16).view(1, 1, 4).repeat(6, 1, 1))
    picture = Image.open(io.BytesIO(mask_overlay_png((images, masks), patch_size=4, count=4)))
    assert picture.format == "PNG" and picture.width > picture.height  # a row of 4 overlays
    assert latest_mask_artifact(None) is None and latest_mask_artifact(tmp_path) is None
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "masks_0000010.png").write_bytes(b"\x89PNG fake")
    assert latest_mask_artifact(tmp_path) == b"\x89PNG fake"


def test_publisher_sends_headline_changes_at_once_and_progress_at_most_every_period() -> None:
    got, epochs = [], []
    publisher = Publisher(got.append, {"epoch": epochs.append}, every=60.0)
    publisher.publish(view())
    publisher.publish(view())  # nothing changed: nothing sent
    publisher.publish(view(step=6))  # progress only, within the period: held back
    publisher.publish(view(step=6, phase="evaluating step 6"))  # a headline change: sent at once
    publisher.publish(view(step=7), force=True)  # the end of a job: sent
    assert [(v.step, v.phase) for v in got] == [(5, "training"), (6, "evaluating step 6"), (7, "training")]
    assert [v.version for v in got] == [1, 2, 3] and epochs == [1]
    publisher.publish(view(step=7, epoch=2, status="stopped"))
    assert epochs == [1, 2]


def test_a_watched_field_with_a_period_is_handed_on_at_most_that_often_but_never_lost() -> None:
    rows: list[int] = []
    publisher = Publisher(None, {"rows": (rows.append, 60.0)}, every=0.0)
    publisher.publish(view(rows=1))
    publisher.publish(view(rows=2, step=6))  # within the period: not yet
    publisher.publish(view(rows=3, step=7))
    assert rows == [1]
    publisher.publish(view(rows=4, step=8, status="stopped"))  # the run ended: its last rows are drawn
    assert rows == [1, 4]


def test_stop_detached_signals_only_a_headless_trainer(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "r", status="running")
    # No process of ours and the lock held by this (non-trainer) process: the control file, never a signal.
    with RunLock(run):
        assert detached.stop_detached(None, run) == "stop flag in control.json"
    assert json.loads((run / "control.json").read_text())["stop"] is True
    assert detached.stop_detached(None, tmp_path / "not-started") == "stop flag in control.json"
    assert not (tmp_path / "not-started").exists()  # never creates a run directory a trainer is about to make
    assert detached._HEADLESS.search("/x/jepa_core/train.py --preset tiny")
    assert detached._HEADLESS.search("/venv/bin/jepa train --name a")
    assert not detached._HEADLESS.search("/venv/bin/marimo edit notebooks/train.py")


def test_log_tail_and_exit_of_a_launched_process(tmp_path: Path) -> None:
    launched = detached.launch_detached(["optim.steps=0"], "bad", runs_dir=tmp_path)  # refused by validation
    assert launched.process.wait(120) == 2 and launched.exited() and launched.returncode == 2
    assert "optim.steps" in launched.log_tail()
    assert not (tmp_path / "bad").exists()
