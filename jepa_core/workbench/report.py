"""`jepa report RUN -o FILE.html [--offline]`: export notebooks/report.py for one run to HTML.

Wraps `marimo export html notebooks/report.py -o FILE -- --run RUN`. marimo exits 1 when a cell
fails but still writes the file; that failure is propagated as the return code.

marimo's exported HTML loads its frontend from a CDN, so the single file needs internet to render.
`--offline` writes a folder instead: the page as index.html with every CDN URL rewritten to a local
copy of the frontend assets that ship inside the installed marimo package (marimo/_static), so the
report renders with no internet once the folder is served over HTTP (browsers refuse ES modules
from file://). The folder holds a README.txt saying so, and either page shows a note instead of a
blank page when it cannot load (no internet; opened as a file).
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import marimo

REPORT_NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "report.py"
# e.g. https://cdn.jsdelivr.net/npm/@marimo-team/frontend@0.25.2/dist/assets/index-x.js
_CDN_PREFIX = re.compile(r"https://cdn\.jsdelivr\.net/npm/@marimo-team/frontend@[^/\"'\s]+/dist/")
# Files beside index.html in marimo/_static that the page links to (icons, manifest).
_STATIC_SUFFIXES = (".ico", ".png", ".json", ".svg", ".webmanifest")
_ROOT_DIV = '<div id="root"></div>'
SERVE_PORT = 8000
# Shown in place of a blank page: a classic inline script runs where the page's ES modules cannot (file://, no CDN).
_NOTE = """
<div id="jepa-report-note" style="display:none;font-family:sans-serif;max-width:44em;margin:3em auto;padding:1em 1.5em;
border:2px solid #e45756;border-radius:6px;line-height:1.5">{text}</div>
<script>(function () {{
  var note = document.getElementById("jepa-report-note");
  function blank() {{ return !document.getElementById("root").children.length; }}
  function show() {{ if (blank()) note.style.display = "block"; }}
  if ({immediately}) show(); else setTimeout(show, 15000);
  // A frontend script that cannot load (no internet for the CDN) says so at once, not after the timeout.
  window.addEventListener("error", function (e) {{ if (e.target && e.target.tagName === "SCRIPT") show(); }}, true);
}})();</script>
"""
_CDN_NOTE = ("<b>This report could not load marimo's frontend</b> from cdn.jsdelivr.net. The single-file report "
             "needs internet; for a machine without it, export a folder with <code>jepa report RUN -o DIR "
             "--offline</code> and serve it (<code>python3 -m http.server -d DIR 8000</code>).")
_FILE_NOTE = ("<b>Serve this folder to read the report</b>: browsers do not run a page's modules from a file. "
              "Run <code>{command}</code> and open <a href=\"{url}\">{url}</a>.")
_README = """This folder is a run report that renders without internet, but it must be served over HTTP:
browsers refuse to run the page's JavaScript modules from file://, so opening index.html directly shows
only a note.

    {command}

(or, from inside this folder: python3 -m http.server {port}) then open {url} in a browser.
"""


def serve_command(folder: Path, port: int = SERVE_PORT) -> str:
    """The one command that serves an offline report folder."""
    import shlex

    return f"python3 -m http.server -d {shlex.quote(str(folder))} {port}"


def add_note(page: str, text: str, immediately: str) -> str:
    """The page with a note shown when nothing rendered (`immediately`: a JS condition to show it at once)."""
    note = _NOTE.format(text=text, immediately=immediately)
    return page.replace(_ROOT_DIV, _ROOT_DIV + note, 1)


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
    url = f"http://localhost:{SERVE_PORT}/"
    command = serve_command(out_dir.resolve())
    page = add_note(page, _FILE_NOTE.format(command=html.escape(command), url=url),
                    immediately='location.protocol === "file:"')
    index = out_dir / "index.html"
    index.write_text(page, encoding="utf-8")
    (out_dir / "README.txt").write_text(_README.format(command=command, url=url, port=SERVE_PORT), encoding="utf-8")
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
        else:
            target.write_text(add_note(target.read_text(encoding="utf-8"), _CDN_NOTE, "false"), encoding="utf-8")
    return result.returncode


def report_main(argv: list[str] | None = None) -> int:
    """CLI entry: `jepa report RUN -o FILE.html [--offline]`. 0 on success, 1 if a cell failed, 2 on bad input."""
    parser = argparse.ArgumentParser(prog="jepa report", description="Export a run's report to HTML.")
    parser.add_argument("run", help="run directory (runs/<name> or data/runs/<name>)")
    parser.add_argument("-o", "--output", required=True, help="output HTML file (folder with --offline)")
    parser.add_argument("--offline", action="store_true",
                        help="write a folder with index.html and local frontend assets, for machines without "
                             "internet (serve it over HTTP: the command is printed)")
    args = parser.parse_args(argv)
    try:
        code = export_report(args.run, args.output, offline=args.offline)
    except (FileNotFoundError, ValueError) as exc:
        print(f"jepa report: {exc}", file=sys.stderr)
        return 2
    if code == 0 and args.offline:
        folder = _offline_dir(Path(args.output)).resolve()
        print(f"wrote {folder}/ (index.html and the frontend assets). Serve it, then open "
              f"http://localhost:{SERVE_PORT}/:\n  {serve_command(folder)}")
    elif code == 0:
        print(f"wrote {args.output} (it loads marimo's frontend from cdn.jsdelivr.net: it needs internet; "
              f"use --offline for a machine without)")
    else:
        print(f"jepa report: a notebook cell failed (marimo exit code {code}); "
              f"the file was written but is incomplete", file=sys.stderr)
    return code
