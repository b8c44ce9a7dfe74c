"""The notebooks pass `marimo check`, run as scripts and in-process, and `jepa report` exports them."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from jepa_core.workbench import report
from jepa_core.config import preset
from browser_util import REPO, XSS, write_synthetic_run

NOTEBOOKS = REPO / "notebooks"


def load_app(name: str):
    spec = importlib.util.spec_from_file_location(f"notebook_{name}", NOTEBOOKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.app


def decoded(page: str) -> str:
    """An exported page's text with the layers of escaping undone (JSON, then HTML, nested outputs)."""
    import html
    import re

    for _ in range(6):
        page = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), page)
        page = html.unescape(page.replace("\\\\", "\\").replace("&#92;", "\\"))
    return page


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
    plan = defs["plan"]
    assert plan.preset == "tiny" and plan.cfg.diagnostics == preset("tiny").diagnostics
    view = defs["session"].view()
    assert view.idle and not view.busy and defs["view"].status == "idle"
    assert not (tmp_path / "runs").exists()  # nothing is written until Start is pressed


def test_every_notebook_cell_hides_its_code() -> None:
    """`marimo edit` then shows the workbench, each cell's code one click away (its faded first line)."""
    for name in ("train", "monitor", "report"):
        source = (NOTEBOOKS / f"{name}.py").read_text()
        assert source.count("@app.cell(hide_code=True)") == source.count("@app.cell"), name


def test_the_project_config_opens_notebooks_ready() -> None:
    """pyproject's [tool.marimo] runs every cell on open and keeps the workbench reactive, whatever a personal
    marimo.toml says (the project's settings override the user's)."""
    from marimo._config.manager import get_default_config_manager

    config = get_default_config_manager(current_path=str(NOTEBOOKS / "train.py")).get_config()
    assert config["runtime"]["auto_instantiate"] is True
    assert config["runtime"]["on_cell_change"] == "autorun"


@pytest.mark.parametrize("name", ["report", "monitor", "train"])
def test_notebook_runs_as_a_script(name: str, xss_run: Path) -> None:
    result = subprocess.run([sys.executable, str(NOTEBOOKS / f"{name}.py"), "--run", str(xss_run)],
                            capture_output=True, text=True, timeout=300, cwd=xss_run.parent)
    assert result.returncode == 0, result.stderr[-3000:]


def test_export_report_writes_escaped_html(xss_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "report.html"
    assert report.export_report(xss_run, out) == 0
    page = out.read_text()
    assert "cdn.jsdelivr.net" in page  # the plain export loads marimo's frontend from its CDN
    assert 'id="jepa-report-note"' in page and "needs internet" in page  # said instead of a blank page
    # The header names the run as character references (inside marimo's JSON-encoded output), never as markup.
    assert "Run report: \\u0026#60;img src\\u0026#61;x onerror" in page
    assert "<img src=x" not in page


def test_export_report_offline_bundle_has_no_cdn_urls(xss_run: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture) -> None:
    assert report.report_main([str(xss_run), "-o", str(tmp_path / "bundle.html"), "--offline"]) == 0
    bundle = tmp_path / "bundle"
    page = (bundle / "index.html").read_text()
    assert "cdn.jsdelivr.net/npm/@marimo-team" not in page
    entry = page.split('type="module" crossorigin src="./', 1)[1].split('"', 1)[0]
    assert (bundle / entry).is_file()
    assert (bundle / "favicon.ico").is_file()
    serve = f"python3 -m http.server -d {bundle.resolve()} 8000"
    assert serve in (bundle / "README.txt").read_text()  # the folder says how to open it
    assert 'location.protocol === "file:"' in page and "Serve this folder" in page
    assert serve in capsys.readouterr().out  # and so does the command


def test_report_of_a_damaged_run_renders_and_names_the_damaged_files(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    run = write_synthetic_run(tmp_path / "damaged")
    (run / "config.toml").write_bytes(b"[model\n\xff")  # neither TOML nor UTF-8
    (run / "meta.json").write_text("{not json")
    code = report.report_main([str(run), "-o", str(tmp_path / "damaged.html")])
    assert code == 0
    text = decoded((tmp_path / "damaged.html").read_text())
    assert "Some of this run's files could not be read" in text
    assert "damaged/config.toml: not valid UTF-8" in text and "damaged/meta.json: malformed JSON" in text
    monkeypatch.setenv("JEPA_RUN", str(run))
    _, defs = load_app("report").run()  # in process too: the header, the charts and the warning
    assert len(defs["problems"]) == 2 and defs["summary"].steps == 200


def test_monitor_notebook_opens_a_damaged_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = write_synthetic_run(tmp_path / "damaged")
    (run / "meta.json").write_text("[1, 2]")  # JSON, but not an object
    (run / "config.toml").write_text("[model\n")
    monkeypatch.setenv("JEPA_RUN", str(run))
    monkeypatch.chdir(tmp_path)
    _, defs = load_app("monitor").run()
    assert [r.name for r in defs["selected"]] == ["damaged"]
    assert defs["tables"]["damaged"].scalars["step"].max() == 200
    (found,) = defs["found"]
    assert found.status == "unknown" and found.problems[0].endswith("meta.json: expected a JSON object, got list")


def test_export_report_propagates_a_failed_cell(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    failing = tmp_path / "failing.py"
    failing.write_text('import marimo\napp = marimo.App()\n\n\n@app.cell\ndef _():\n    raise RuntimeError("boom")\n'
                       '    return\n')
    run = write_synthetic_run(tmp_path / "run")
    code = report.export_report(run, tmp_path / "failed.html", notebook=failing)
    assert code != 0
    assert (tmp_path / "failed.html").is_file()  # marimo still writes the page
    assert "boom" in capsys.readouterr().err


def test_report_main_rejects_a_missing_run(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert report.report_main([str(tmp_path / "nope"), "-o", str(tmp_path / "x.html")]) == 2
    assert "nope" in capsys.readouterr().err


def test_rewrite_cdn_urls() -> None:
    page = ('<script src="https://cdn.jsdelivr.net/npm/@marimo-team/frontend@0.25.2/dist/assets/a.js">'
            '<link href="https://cdn.jsdelivr.net/npm/@marimo-team/frontend@0.25.2/dist/favicon.ico">')
    rewritten, count = report.rewrite_cdn_urls(page)
    assert count == 2 and 'src="./assets/a.js"' in rewritten and 'href="./favicon.ico"' in rewritten
