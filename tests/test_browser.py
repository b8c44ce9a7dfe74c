"""The notebooks and the exported report in a real (headless) Chromium, driven through Playwright.

Each test starts `marimo run` (or `python -m http.server` for the offline report) on a free local port
and always kills it in teardown. Screenshots go to the test's tmp dir; the current screenshots of the
three notebooks are also written to data/screenshots/.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
from browser_util import (CHROMIUM, CHROMIUM_ARGS, REPO, XSS, free_port, marimo_run_cmd, server,
                          write_synthetic_run)
from playwright import sync_api as playwright_api  # installed by the dev extra

from jepa_core import report

pytestmark = [pytest.mark.browser, pytest.mark.slow]
# The README's screenshots are refreshed only on request, so a test run never dirties the working tree:
#   JEPA_UPDATE_SCREENSHOTS=1 python -m pytest tests/test_browser.py
SCREENSHOTS = REPO / "data" / "screenshots"
UPDATE_SCREENSHOTS = bool(os.environ.get("JEPA_UPDATE_SCREENSHOTS"))
CHART = ".vega-embed canvas, .vega-embed svg"
VIEWPORT = {"width": 1400, "height": 1600}


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with playwright_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def xss_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run whose directory name and alert message are an HTML payload."""
    return write_synthetic_run(tmp_path_factory.mktemp("xss") / XSS, message=XSS)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A shipped recorded run for the screenshots when there is one, else a synthetic one."""
    shipped = sorted((REPO / "data" / "runs").glob("*/metrics.jsonl"))
    healthy = [p.parent for p in shipped if "healthy" in p.parent.name]
    if healthy or shipped:
        return (healthy or [p.parent for p in shipped])[0]
    return write_synthetic_run(tmp_path_factory.mktemp("demo") / "demo-run")


def new_page(browser):
    page = browser.new_page(viewport=VIEWPORT)
    page.set_default_timeout(90_000)
    return page


def wait_for_charts(page, count: int, timeout_s: float = 90.0) -> None:
    # Playwright locators pierce marimo's shadow roots; document.querySelectorAll would not.
    deadline = time.monotonic() + timeout_s
    while page.locator(CHART).count() < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"fewer than {count} charts drawn after {timeout_s} s")
        page.wait_for_timeout(300)


def assert_no_errors_and_no_xss(page) -> None:
    body = page.inner_text("body")
    assert "An internal error occurred" not in body
    assert "Traceback" not in body
    assert page.evaluate("window.__xss") is None


def shoot(page, *paths: Path) -> None:
    """Screenshots into the test's directory; README copies (under data/screenshots) only when asked for."""
    for path in paths:
        if path.parent == SCREENSHOTS and not UPDATE_SCREENSHOTS:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(path), full_page=True)


@pytest.mark.parametrize("notebook", ["monitor", "report"])
def test_notebook_draws_charts_and_renders_names_as_text(notebook: str, browser, xss_run: Path,
                                                          tmp_path: Path) -> None:
    port = free_port()
    cmd = marimo_run_cmd(f"{notebook}.py", port, "--run", str(xss_run))
    with server(cmd, port, cwd=tmp_path, log=tmp_path / "server.log") as url:
        page = new_page(browser)
        page.goto(url)
        wait_for_charts(page, 3)
        page.wait_for_timeout(1500)  # let the remaining cells settle
        shoot(page, tmp_path / f"{notebook}-xss.png")
        assert XSS in page.inner_text("body")  # the payload is visible as text, not markup
        assert_no_errors_and_no_xss(page)
        page.close()


@pytest.mark.parametrize("notebook", ["monitor", "report"])
def test_notebook_screenshot_of_a_demo_run(notebook: str, browser, demo_run: Path, tmp_path: Path) -> None:
    port = free_port()
    cmd = marimo_run_cmd(f"{notebook}.py", port, "--run", str(demo_run))
    with server(cmd, port, cwd=REPO, log=tmp_path / "server.log") as url:
        page = new_page(browser)
        page.goto(url)
        wait_for_charts(page, 3)
        page.wait_for_timeout(1500)
        assert_no_errors_and_no_xss(page)
        shoot(page, tmp_path / f"{notebook}.png", SCREENSHOTS / f"{notebook}.png")
        page.close()


def test_offline_report_renders_with_the_network_cut(browser, xss_run: Path, tmp_path: Path) -> None:
    assert report.export_report(xss_run, tmp_path / "report.html", offline=True) == 0
    bundle = tmp_path / "report"
    port = free_port()
    cmd = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(bundle)]
    with server(cmd, port, cwd=tmp_path) as url:
        context = browser.new_context(viewport=VIEWPORT)
        blocked: list[str] = []

        def only_localhost(route) -> None:
            if route.request.url.startswith(url):
                route.continue_()
            else:
                blocked.append(route.request.url)
                route.abort()

        context.route("**/*", only_localhost)
        page = context.new_page()
        page.goto(f"{url}/index.html")
        wait_for_charts(page, 3)
        page.wait_for_timeout(1000)
        shoot(page, tmp_path / "offline-report.png")
        assert XSS in page.inner_text("body")
        assert_no_errors_and_no_xss(page)
        assert not [u for u in blocked if "marimo" in u or u.endswith(".js")], blocked
        context.close()


def current_step(page) -> int:
    text = page.locator(".jepa-step").first.inner_text() if page.locator(".jepa-step").count() else ""
    match = re.search(r"step (\d+)", text)
    return int(match.group(1)) if match else -1


def wait_for_step(page, minimum: int, timeout_s: float = 240.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        step = current_step(page)
        if step >= minimum:
            return step
        page.wait_for_timeout(500)
    raise AssertionError(f"step counter did not reach {minimum} in {timeout_s} s (last: {current_step(page)})")


def test_train_start_advances_and_stop_stops(browser, tmp_path: Path) -> None:
    port = free_port()
    with server(marimo_run_cmd("train.py", port), port, cwd=tmp_path, log=tmp_path / "server.log") as url:
        page = new_page(browser)
        page.goto(url)
        start = page.get_by_role("button", name="Start", exact=True)
        start.wait_for()
        name_box = page.locator("input[placeholder='timestamp']")  # the run name box
        name_box.fill(XSS)
        name_box.press("Enter")
        page.wait_for_timeout(1500)  # the config cell re-runs with the new name
        start.click()
        first = wait_for_step(page, 5)
        wait_for_charts(page, 2)
        chart_before = page.locator(".vega-embed").first.screenshot()
        second = wait_for_step(page, first + 1)
        page.wait_for_timeout(1500)
        assert second > first
        assert page.locator(".vega-embed").first.screenshot() != chart_before  # the chart advanced
        shoot(page, tmp_path / "train.png", SCREENSHOTS / "train.png")
        page.get_by_role("button", name="Stop", exact=True).click()
        page.locator(".jepa-progress", has_text="stopped").wait_for(timeout=120_000)
        stopped_at = current_step(page)
        page.wait_for_timeout(3000)
        assert current_step(page) == stopped_at
        assert XSS in page.inner_text("body")
        assert_no_errors_and_no_xss(page)
        page.close()
    run_dir = tmp_path / "runs" / XSS
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "stopped" and meta["last_step"] == stopped_at


def test_monitor_follows_a_live_run(browser, tmp_path: Path) -> None:
    import os
    import socket

    run = write_synthetic_run(tmp_path / "live-run", steps=100, status="running")
    meta = json.loads((run / "meta.json").read_text())
    meta.update(pid=os.getpid(), hostname=socket.gethostname())  # this test process "is" the trainer
    (run / "meta.json").write_text(json.dumps(meta))
    port = free_port()
    with server(marimo_run_cmd("monitor.py", port, "--run", str(run)), port, cwd=tmp_path,
                log=tmp_path / "server.log") as url:
        page = new_page(browser)
        page.goto(url)
        wait_for_charts(page, 3)
        page.get_by_text("last step 100", exact=False).wait_for()
        assert "following live" in page.inner_text("body")
        with open(run / "metrics.jsonl", "a") as stream:
            for step in range(101, 161):
                stream.write(json.dumps({"step": step, "attempt": 1, "loss": 0.05, "grad_norm": 0.4}) + "\n")
        page.get_by_text("last step 160", exact=False).wait_for(timeout=30_000)
        assert_no_errors_and_no_xss(page)
        page.close()
