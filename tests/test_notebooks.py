"""The notebooks pass `marimo check`, run as scripts and in-process, and `jepa report` exports them."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from jepa_core import report
from jepa_core.config import preset
from browser_util import REPO, XSS, write_synthetic_run

NOTEBOOKS = REPO / "notebooks"


def load_app(name: str):
    spec = importlib.util.spec_from_file_location(f"notebook_{name}", NOTEBOOKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.app


@pytest.fixture()
def xss_run(tmp_path: Path) -> Path:
    """A synthetic run whose name and alert message carry an HTML payload."""
    return write_synthetic_run(tmp_path / XSS, message=XSS)


def test_marimo_check_is_clean() -> None:
    result = subprocess.run([sys.executable, "-m", "marimo", "check", str(NOTEBOOKS)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_report_notebook_runs_in_process(xss_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JEPA_RUN", str(xss_run))
    _, defs = load_app("report").run()
    assert defs["summary"].name == XSS and defs["summary"].steps == 200
    assert len(defs["table"].alerts) == 1


def test_monitor_notebook_runs_in_process(xss_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JEPA_RUN", str(xss_run))
    monkeypatch.chdir(xss_run.parent)  # no runs/ or data/runs/ here: only the named run is offered
    _, defs = load_app("monitor").run()
    assert [r.name for r in defs["selected"]] == [XSS]
    assert defs["tables"][XSS].scalars["step"].max() == 200


def test_train_notebook_builds_a_valid_config_without_training(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _, defs = load_app("train").run()
    session = defs["session"]
    preset_name, overrides, cfg = session["pending"]
    assert preset_name == "tiny" and cfg.diagnostics == preset("tiny").diagnostics
    assert session["trainer"] is None and not session["busy"]
    assert not (tmp_path / "runs").exists()  # nothing is written until Start is pressed


@pytest.mark.parametrize("name", ["report", "monitor"])
def test_notebook_runs_as_a_script(name: str, xss_run: Path) -> None:
    result = subprocess.run([sys.executable, str(NOTEBOOKS / f"{name}.py"), "--run", str(xss_run)],
                            capture_output=True, text=True, timeout=300, cwd=xss_run.parent)
    assert result.returncode == 0, result.stderr[-3000:]


def test_export_report_writes_escaped_html(xss_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "report.html"
    assert report.export_report(xss_run, out) == 0
    page = out.read_text()
    assert "cdn.jsdelivr.net" in page  # the plain export loads marimo's frontend from its CDN
    # The header names the run HTML-escaped (&lt; inside marimo's JSON-encoded output), never as markup.
    assert "Run report: \\u0026lt;img src=x onerror=window.__xss=1\\u0026gt;" in page
    assert "<img src=x" not in page


def test_export_report_offline_bundle_has_no_cdn_urls(xss_run: Path, tmp_path: Path) -> None:
    assert report.report_main([str(xss_run), "-o", str(tmp_path / "bundle.html"), "--offline"]) == 0
    bundle = tmp_path / "bundle"
    page = (bundle / "index.html").read_text()
    assert "cdn.jsdelivr.net/npm/@marimo-team" not in page
    entry = page.split('type="module" crossorigin src="./', 1)[1].split('"', 1)[0]
    assert (bundle / entry).is_file()
    assert (bundle / "favicon.ico").is_file()


def test_export_report_propagates_a_failed_cell(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run = write_synthetic_run(tmp_path / "broken")
    (run / "config.toml").write_text("[model\n")  # load_run_summary raises in the notebook
    code = report.report_main([str(run), "-o", str(tmp_path / "broken.html")])
    assert code != 0
    assert (tmp_path / "broken.html").is_file()  # marimo still writes the page
    assert "cell failed" in capsys.readouterr().err


def test_report_main_rejects_a_missing_run(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert report.report_main([str(tmp_path / "nope"), "-o", str(tmp_path / "x.html")]) == 2
    assert "nope" in capsys.readouterr().err


def test_rewrite_cdn_urls() -> None:
    page = ('<script src="https://cdn.jsdelivr.net/npm/@marimo-team/frontend@0.25.2/dist/assets/a.js">'
            '<link href="https://cdn.jsdelivr.net/npm/@marimo-team/frontend@0.25.2/dist/favicon.ico">')
    rewritten, count = report.rewrite_cdn_urls(page)
    assert count == 2 and 'src="./assets/a.js"' in rewritten and 'href="./favicon.ico"' in rewritten
