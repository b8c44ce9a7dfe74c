"""`jepa report RUN -o FILE.html [--offline]`: export notebooks/report.py for one run to HTML.

Wraps `marimo export html notebooks/report.py -o FILE -- --run RUN`. marimo exits 1 when a cell
fails but still writes the file; that failure is propagated as the return code.

marimo's exported HTML loads its frontend from a CDN. `--offline` writes a folder instead: the
page as index.html with every CDN URL rewritten to a local copy of the frontend assets that ship
inside the installed marimo package (marimo/_static), so the report renders with no internet
when served over HTTP (browsers refuse ES modules from file://).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import marimo

REPORT_NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "report.py"
# e.g. https://cdn.jsdelivr.net/npm/@marimo-team/frontend@0.25.2/dist/assets/index-x.js
_CDN_PREFIX = re.compile(r"https://cdn\.jsdelivr\.net/npm/@marimo-team/frontend@[^/\"'\s]+/dist/")
# Files beside index.html in marimo/_static that the page links to (icons, manifest).
_STATIC_SUFFIXES = (".ico", ".png", ".json", ".svg", ".webmanifest")


def marimo_static_dir() -> Path:
    """The frontend build shipped with the installed marimo."""
    static = Path(marimo.__file__).resolve().parent / "_static"
    if not (static / "assets").is_dir():
        raise FileNotFoundError(f"{static}/assets not found: this marimo install has no bundled frontend")
    return static


def rewrite_cdn_urls(page: str) -> tuple[str, int]:
    """Point every marimo-frontend CDN URL at ./ (the local copy); returns the page and the count."""
    return _CDN_PREFIX.subn("./", page)


def write_offline_bundle(exported_html: Path, out_dir: Path) -> Path:
    """Turn one exported HTML file into `out_dir/index.html` plus the frontend assets it loads."""
    static = marimo_static_dir()
    page, count = rewrite_cdn_urls(exported_html.read_text(encoding="utf-8"))
    if count == 0:
        raise ValueError(f"{exported_html}: no marimo CDN URLs found to rewrite; "
                         "the export format may have changed")
    out_dir.mkdir(parents=True, exist_ok=True)
    assets = out_dir / "assets"
    if assets.exists():
        shutil.rmtree(assets)
    # Plain copies, never hard links: rewriting a linked copy later would alter marimo's own files.
    shutil.copytree(static / "assets", assets)
    for item in static.iterdir():
        if item.is_file() and item.suffix in _STATIC_SUFFIXES:
            shutil.copyfile(item, out_dir / item.name)
    index = out_dir / "index.html"
    index.write_text(page, encoding="utf-8")
    return index


def _offline_dir(out: Path) -> Path:
    """`-o report.html --offline` writes the folder `report/`; any other name is the folder itself."""
    return out.with_suffix("") if out.suffix.lower() == ".html" else out


def export_report(run: str | Path, out_html: str | Path, offline: bool = False,
                  notebook: Path = REPORT_NOTEBOOK, timeout: float = 900.0) -> int:
    """Export the report notebook for `run`; returns marimo's exit code (non-zero if a cell failed).

    With `offline`, the result is a folder (see `_offline_dir`) whose index.html needs no internet.
    """
    run_path = Path(run).resolve()
    if not run_path.is_dir():
        raise FileNotFoundError(f"run directory {run} does not exist")
    if not notebook.is_file():
        raise FileNotFoundError(f"report notebook {notebook} not found")
    out = Path(out_html)
    with tempfile.TemporaryDirectory(prefix="jepa-report-") as tmp:
        target = Path(tmp) / "report.html" if offline else out
        target.parent.mkdir(parents=True, exist_ok=True)
        # -f: never stop at an "overwrite?" prompt; the report shows results, not code.
        cmd = [sys.executable, "-m", "marimo", "export", "html", str(notebook), "-o", str(target), "-f",
               "--no-include-code", "--no-sandbox", "--", "--run", str(run_path)]
        result = subprocess.run(cmd, cwd=notebook.parents[1], timeout=timeout,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if result.returncode != 0:
            sys.stderr.write(result.stdout[-4000:])
        if not target.is_file():
            sys.stderr.write(f"marimo export wrote no file (exit code {result.returncode})\n")
            return result.returncode or 1
        if offline:
            write_offline_bundle(target, _offline_dir(out))
    return result.returncode


def report_main(argv: list[str] | None = None) -> int:
    """CLI entry: `jepa report RUN -o FILE.html [--offline]`. 0 on success, 1 if a cell failed, 2 on bad input."""
    parser = argparse.ArgumentParser(prog="jepa report", description="Export a run's report to HTML.")
    parser.add_argument("run", help="run directory (runs/<name> or data/runs/<name>)")
    parser.add_argument("-o", "--output", required=True, help="output HTML file (folder with --offline)")
    parser.add_argument("--offline", action="store_true",
                        help="write a folder with index.html and local frontend assets (serve it over HTTP)")
    args = parser.parse_args(argv)
    try:
        code = export_report(args.run, args.output, offline=args.offline)
    except (FileNotFoundError, ValueError) as exc:
        print(f"jepa report: {exc}", file=sys.stderr)
        return 2
    if code == 0:
        where = _offline_dir(Path(args.output)) / "index.html" if args.offline else Path(args.output)
        print(f"wrote {where}")
    else:
        print(f"jepa report: a notebook cell failed (marimo exit code {code}); "
              f"the file was written but is incomplete", file=sys.stderr)
    return code
