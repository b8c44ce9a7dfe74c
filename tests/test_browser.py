"""The notebooks and the exported report in a real (headless) Chromium, driven through Playwright.

The notebooks are opened the way the README tells users to: `marimo edit notebooks/X.py`, with marimo's default
user configuration (a fresh HOME and XDG config folder, so no personal marimo.toml applies), and never a click on
run-all: the project's pyproject [tool.marimo] must make them open ready. Each test starts its server on a free
local port and always kills it (and any trainer it launched) in teardown. Screenshots go to the test's tmp dir; the
README's copies in data/screenshots/ only when asked for:
    JEPA_UPDATE_SCREENSHOTS=1 python -m pytest tests/test_browser.py
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
from browser_util import (CHROMIUM, CHROMIUM_ARGS, REPO, XSS, default_marimo_env, free_port, marimo_edit_cmd, server,
                          write_synthetic_run)
from playwright import sync_api as playwright_api  # installed by the dev extra

from jepa_core.workbench import report
from jepa_core.run.lock import lock_holder
from jepa_core.metrics.stream import iter_rows

pytestmark = [pytest.mark.browser, pytest.mark.slow]
SCREENSHOTS = REPO / "data" / "screenshots"
UPDATE_SCREENSHOTS = bool(os.environ.get("JEPA_UPDATE_SCREENSHOTS"))
CHART = ".vega-embed canvas, .vega-embed svg"
VIEWPORT = {"width": 1400, "height": 1600}
TALL = {"width": 1400, "height": 2400}  # marimo scrolls inside the page: a screenshot shows one viewport


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


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run stopped by the workbench's Stop after Step N (meta.json: "stopped", last_step 4)."""
    from jepa_core.workbench.plan import plan_from_form
    from jepa_core.workbench.session import TrainingSession

    runs_dir = tmp_path_factory.mktemp("stopped") / "runs"
    plan = plan_from_form({"preset": "tiny"}, extra={
        "data.num_train": 256, "data.num_heldout": 256, "optim.steps": 30, "optim.batch_size": 16,
        "optim.warmup_steps": 3, "eval.at_start": False, "logging.tensorboard": False, "runtime.num_threads": 1,
        "logging.runs_dir": str(runs_dir), "logging.name": "stopped-run"})
    session = TrainingSession(roots=[runs_dir])
    session.step(plan, 4)
    assert session.wait(120)
    session.stop()
    assert session.wait(120)
    run = runs_dir / "stopped-run"
    assert json.loads((run / "meta.json").read_text())["status"] == "stopped"
    return run


@contextlib.contextmanager
def edit_server(notebook: str, tmp_path: Path, *args: str, cwd: Path | None = None) -> Iterator[str]:
    port = free_port()
    # One torch thread for the kernel's trainer (and a detached one): on a shared 2-core machine two spinning
    # OpenMP threads per process make each step many times slower.
    env = {**default_marimo_env(tmp_path / "home"), "OMP_NUM_THREADS": "1"}
    with server(marimo_edit_cmd(notebook, port, *args), port, cwd=cwd or tmp_path, log=tmp_path / "server.log",
                env=env) as url:
        yield url


def new_page(browser, viewport: dict = VIEWPORT):
    page = browser.new_page(viewport=viewport)
    page.set_default_timeout(90_000)
    return page


def wait_for(page, condition, what: str, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        page.wait_for_timeout(300)


def wait_for_charts(page, count: int, timeout_s: float = 120.0) -> None:
    # Playwright locators pierce marimo's shadow roots; document.querySelectorAll would not.
    wait_for(page, lambda: page.locator(CHART).count() >= count, f"{count} charts", timeout_s)


OUTPUT = "[data-cell-role='output']"


def outputs(page):
    """The cells' outputs: what a user reads (the folded code of each cell is in the page too)."""
    return page.locator(OUTPUT)


def shows(page, text: str) -> bool:
    """Whether some cell output shows `text` (locators pierce the shadow roots marimo renders widgets in)."""
    return outputs(page).get_by_text(text, exact=False).count() > 0


def assert_no_errors_and_no_xss(page) -> None:
    assert not shows(page, "An internal error occurred")
    assert not shows(page, "Traceback")
    assert page.evaluate("window.__xss") is None


def assert_opened_as_a_workbench(page) -> None:
    """Every cell ran on open (no stale cell waiting for run-all) and the code is folded away."""
    assert page.locator("[data-testid='cell-editor'].opacity-20").count() > 0  # marimo's folded, hidden code
    assert page.locator("[data-testid='cell-status'][data-status='stale']").count() == 0
    assert page.locator("[data-testid='cell-status'][data-status='outdated']").count() == 0  # run-all button dark


def shoot(page, *paths: Path) -> None:
    """Screenshots into the test's directory; README copies (under data/screenshots) only when asked for. Taken
    when no output is being recomputed (marimo greys those)."""
    busy = page.locator(".marimo-output-stale, .marimo-output-loading")
    wait_for(page, lambda: busy.count() == 0, "no output being recomputed", 30)
    for path in paths:
        if path.parent == SCREENSHOTS and not UPDATE_SCREENSHOTS:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(path))


def number_input(page, label: str):
    # marimo puts a number's label into the input's aria-label (as markup)
    return page.locator(f"input[aria-label*='>{label}<']")


def set_number(page, label: str, value: int) -> None:
    box = number_input(page, label)
    box.fill(str(value))
    box.press("Enter")


def no_eval_at_start(page) -> None:
    """Switch off the step-0 evaluation (a probe on the held-out set): the first steps come sooner."""
    page.get_by_role("switch", name=re.compile("evaluate at step 0")).click()


def progress(page) -> tuple[str, int]:
    """(status word, step) from the workbench's progress panel."""
    panel = page.locator(".jepa-progress").first
    if not panel.count():
        return "", -1
    status = panel.get_attribute("data-status") or ""
    match = re.search(r"step (\d+)", panel.inner_text())
    return status, int(match.group(1)) if match else -1


def wait_for_progress(page, status: str | None = None, min_step: int = -1, timeout_s: float = 240.0) -> int:
    def reached() -> bool:
        now, step = progress(page)
        return (status is None or now == status) and step >= min_step

    wait_for(page, reached, f"status {status} at step >= {min_step} (now {progress(page)})", timeout_s)
    return progress(page)[1]


def choose_option(page, text: str, timeout_s: float) -> None:
    """Select, in whichever dropdown lists it, the option whose label starts with `text` (once it is listed)."""
    choice = page.locator("select").filter(has=page.locator("option", has_text=text)).first
    choice.wait_for(timeout=timeout_s * 1000)
    choice.select_option(label=next(t for t in choice.locator("option").all_inner_texts() if t.startswith(text)))


def message(page) -> str:
    box = page.locator(".jepa-message")
    return box.first.inner_text() if box.count() else ""


@contextlib.contextmanager
def reaped(run: Path) -> Iterator[None]:
    """Kill a detached trainer left holding `run` when the test fails before stopping it."""
    try:
        yield
    finally:
        holder = lock_holder(run) if run.exists() else None
        if holder and isinstance(holder.get("pid"), int) and holder["pid"] != os.getpid():
            with contextlib.suppress(ProcessLookupError):
                os.kill(holder["pid"], signal.SIGKILL)


# ------------------------------------------------------------------------------------------- monitor and report
@pytest.mark.parametrize("notebook", ["monitor", "report"])
def test_notebook_opens_ready_and_renders_names_as_text(notebook: str, browser, xss_run: Path,
                                                         tmp_path: Path) -> None:
    with edit_server(f"{notebook}.py", tmp_path, "--run", str(xss_run)) as url:
        page = new_page(browser)
        page.goto(url)
        wait_for_charts(page, 3)  # no run-all click: the cells ran when the notebook opened
        page.wait_for_timeout(1500)  # let the remaining cells settle
        shoot(page, tmp_path / f"{notebook}-xss.png")
        assert_opened_as_a_workbench(page)
        assert shows(page, XSS)  # the payload is visible as text, not markup
        assert_no_errors_and_no_xss(page)
        page.close()


@pytest.mark.parametrize("notebook", ["monitor", "report"])
def test_notebook_screenshot_of_a_demo_run(notebook: str, browser, demo_run: Path, tmp_path: Path) -> None:
    with edit_server(f"{notebook}.py", tmp_path, "--run", str(demo_run), cwd=REPO) as url:
        page = new_page(browser, TALL)
        page.goto(url)
        wait_for_charts(page, 3)
        page.wait_for_timeout(2500)
        assert_no_errors_and_no_xss(page)
        shoot(page, tmp_path / f"{notebook}.png", SCREENSHOTS / f"{notebook}.png")
        page.close()


def test_a_stopped_run_reads_stopped_in_the_monitor_and_the_report(browser, stopped_run: Path,
                                                                   tmp_path: Path) -> None:
    with edit_server("monitor.py", tmp_path, "--run", str(stopped_run)) as url:
        page = new_page(browser)
        page.goto(url)
        wait_for_charts(page, 2)
        header = outputs(page).get_by_text("status stopped, last step 4", exact=False)
        header.first.wait_for()
        row = page.get_by_role("row").filter(has_text="stopped-run")
        assert "stopped" in row.first.inner_text() and "finished" not in row.first.inner_text()
        assert_no_errors_and_no_xss(page)
        page.close()
    assert report.export_report(stopped_run, tmp_path / "report.html", offline=True) == 0
    port = free_port()
    bundle = tmp_path / "report"
    cmd = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(bundle)]
    with server(cmd, port, cwd=tmp_path) as url:
        page = new_page(browser)
        page.goto(f"{url}/index.html")
        wait_for_charts(page, 2)
        text = page.locator("#root").inner_text()
        assert re.search(r"status\s+stopped", text) and re.search(r"last step\s+4", text)
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
        assert not page.locator("#jepa-report-note").is_visible()
        assert page.evaluate("window.__xss") is None
        assert not [u for u in blocked if "marimo" in u or u.endswith(".js")], blocked
        context.close()
    # Opened as a file the folder cannot run its modules: it says how to serve it instead of staying blank.
    page = new_page(browser)
    page.goto((bundle / "index.html").as_uri())
    note = page.locator("#jepa-report-note")
    note.wait_for(state="visible", timeout=20_000)
    assert "python3 -m http.server -d" in note.inner_text()
    page.close()


def test_single_file_report_without_internet_says_why_it_is_blank(browser, xss_run: Path, tmp_path: Path) -> None:
    assert report.export_report(xss_run, tmp_path / "single" / "report.html") == 0
    port = free_port()
    folder = tmp_path / "single"
    cmd = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(folder)]
    with server(cmd, port, cwd=tmp_path) as url:
        context = browser.new_context(viewport=VIEWPORT)
        context.route("**/*", lambda route: route.continue_() if route.request.url.startswith(url) else route.abort())
        page = context.new_page()
        page.goto(f"{url}/report.html")
        note = page.locator("#jepa-report-note")
        note.wait_for(state="visible", timeout=20_000)  # the CDN is unreachable: the page says so
        assert "needs internet" in note.inner_text() and "--offline" in note.inner_text()
        context.close()


def test_monitor_follows_a_live_run(browser, tmp_path: Path) -> None:
    import socket

    run = write_synthetic_run(tmp_path / "live-run", steps=100, status="running")
    meta = json.loads((run / "meta.json").read_text())
    meta.update(pid=os.getpid(), hostname=socket.gethostname())  # this test process "is" the trainer
    (run / "meta.json").write_text(json.dumps(meta))
    with edit_server("monitor.py", tmp_path, "--run", str(run)) as url:
        page = new_page(browser)
        page.goto(url)
        wait_for_charts(page, 3)
        outputs(page).get_by_text("last step 100", exact=False).first.wait_for()
        assert shows(page, "following live")
        with open(run / "metrics.jsonl", "a") as stream:
            for step in range(101, 161):
                stream.write(json.dumps({"step": step, "attempt": 1, "loss": 0.05, "grad_norm": 0.4}) + "\n")
        outputs(page).get_by_text("last step 160", exact=False).first.wait_for(timeout=30_000)
        assert_no_errors_and_no_xss(page)
        page.close()


# ------------------------------------------------------------------------------------------------ the workbench
def test_train_workbench_step_n_cadence_and_stop(browser, tmp_path: Path) -> None:
    run = tmp_path / "runs" / "workbench-run"
    with edit_server("train.py", tmp_path) as url, reaped(run):
        page = new_page(browser, TALL)
        page.goto(url)
        page.get_by_role("button", name="Start", exact=True).wait_for()  # no run-all: the form is there
        page.locator(".jepa-progress[data-status='idle']").wait_for()
        assert not shows(page, "step 0 / 1")
        assert_opened_as_a_workbench(page)
        name_box = page.locator("input[placeholder='timestamp']")
        name_box.fill(XSS)
        name_box.press("Enter")
        outputs(page).get_by_text("Config error", exact=False).first.wait_for()  # the name is refused, shown as text
        assert shows(page, XSS)
        name_box.fill("workbench-run")
        name_box.press("Enter")
        set_number(page, "training images (built-in shapes)", 2048)
        set_number(page, "steps", 300)
        set_number(page, "batch size", 32)
        set_number(page, "N", 5)
        no_eval_at_start(page)
        outputs(page).get_by_text("Config OK: run workbench-run", exact=False).first.wait_for()

        page.get_by_role("button", name="Step N", exact=True).click()
        assert wait_for_progress(page, "paused", 5) == 5
        assert json.loads((run / "meta.json").read_text())["status"] == "paused"
        page.get_by_role("button", name="Step N", exact=True).click()
        assert wait_for_progress(page, "paused", 10) == 10
        assert "Step N goes on" in message(page)

        page.get_by_role("button", name="Start", exact=True).click()
        wait_for_progress(page, "running", 12)
        wait_for_charts(page, 2)
        page.get_by_role("tab", name="diagnostic cadences (live)").click()
        slider = page.get_by_role("slider").first  # basic_every_steps
        slider.focus()
        slider.press("ArrowLeft")  # every 10 steps -> every 5
        wait_for(page, lambda: any(r.get("event") == "cadence" for r in iter_rows(run / "metrics.jsonl")),
                 "the cadence event row in metrics.jsonl", 120)
        page.get_by_role("tab", name="config").click()
        wait_for_progress(page, "running", 45)  # a few points on each chart for the picture
        page.wait_for_timeout(1500)
        shoot(page, tmp_path / "train.png", SCREENSHOTS / "train.png")

        page.get_by_role("button", name="Stop", exact=True).click()
        stopped_at = wait_for_progress(page, "stopped", 12, timeout_s=120)
        assert message(page) == f"stopped at step {stopped_at} of 300."  # no pile of earlier messages
        assert_no_errors_and_no_xss(page)
        page.close()
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "stopped" and meta["last_step"] == stopped_at
    cadence = next(r for r in iter_rows(run / "metrics.jsonl") if r.get("event") == "cadence")
    assert cadence["basic_every_steps"] == 5


def test_train_launch_detached_reattach_after_a_reload_stop_and_resume(browser, tmp_path: Path) -> None:
    run = tmp_path / "runs" / "detached-run"
    with edit_server("train.py", tmp_path) as url, reaped(run):
        page = new_page(browser)
        page.goto(url)
        page.get_by_role("button", name="Launch detached", exact=True).wait_for()
        name_box = page.locator("input[placeholder='timestamp']")
        name_box.fill("detached-run")
        name_box.press("Enter")
        set_number(page, "training images (built-in shapes)", 2048)
        set_number(page, "steps", 100_000)
        no_eval_at_start(page)
        outputs(page).get_by_text("Config OK: run detached-run", exact=False).first.wait_for()
        page.get_by_role("button", name="Launch detached", exact=True).click()
        wait_for(page, lambda: message(page).startswith("Launched pid"), "the launch message", 60)
        launched_pid = int(message(page).split()[2].rstrip(":"))

        # The list of running runs is built again once the run exists: no kernel restart needed, even after a
        # page reload (which reconnects to the same session)
        page.reload()
        choose_option(page, "detached-run [running", 180)
        # One click, one trainer: the run lists were rebuilt since (the cell that handles clicks ran again)
        assert trainer_processes("detached-run") == [launched_pid]
        page.get_by_role("button", name="Reattach", exact=True).click()
        wait_for(page, lambda: message(page).startswith("Following"), "the reattach message", 60)
        wait_for_progress(page, "running", 3)
        assert trainer_processes("detached-run") == [launched_pid]
        assert "already exists" not in (tmp_path / "runs" / ".logs" / "detached-run.log").read_text()
        page.get_by_role("button", name="Stop", exact=True).click()
        stopped_at = wait_for_progress(page, "stopped", 3, timeout_s=120)

        # Now listed among the runs to resume: Resume goes on from its checkpoint in a new detached process
        choose_option(page, "detached-run [stopped", 60)
        page.get_by_role("button", name="Resume (detached)", exact=True).click()
        wait_for(page, lambda: message(page).startswith("Resuming detached-run"), "the resume message", 60)
        wait_for_progress(page, "running", stopped_at + 3, timeout_s=120)
        page.get_by_role("button", name="Stop", exact=True).click()
        stopped_again = wait_for_progress(page, "stopped", stopped_at + 3, timeout_s=120)
        assert_no_errors_and_no_xss(page)
        page.close()
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "stopped" and meta["last_step"] == stopped_again
    assert lock_holder(run) is None  # the detached trainer ended and let the run go


def trainer_processes(name: str) -> list[int]:
    """Pids of `jepa train` processes on this machine training (or resuming) the run named `name`."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = proc.info["cmdline"] or []
        if "jepa_core.train" in cmd and any(arg == name or arg.endswith(f"/{name}") for arg in cmd):
            found.append(proc.info["pid"])
    return found


def test_form_20_step_run_then_rewind_here_from_its_alert(browser, tmp_path: Path) -> None:
    """The form starts a 20-step run (its warm-up scaled), one Start click acts once, the next click after a Tab
    counts, and "rewind here" on the run's alert launches exactly one branch, drawn over its parent."""
    parent, branch = tmp_path / "runs" / "leaky", tmp_path / "runs" / "leaky-fixed"
    with edit_server("train.py", tmp_path) as url, reaped(parent), reaped(branch):
        page = new_page(browser, TALL)
        page.goto(url)
        page.get_by_role("button", name="Start", exact=True).wait_for()
        set_number(page, "training images (built-in shapes)", 512)
        no_eval_at_start(page)
        page.get_by_role("tab", name="fault injection").click()
        leak = page.locator("[role=slider]:visible").first
        leak.focus()
        for _ in range(10):  # 0.05 a press: a mask leak of one half from step 0
            leak.press("ArrowRight")
        page.get_by_role("tab", name="config").click()
        steps = number_input(page, "steps")
        steps.fill("20")
        steps.press("Tab")
        name_box = page.locator("input[placeholder='timestamp']")  # the form's last field
        name_box.fill("leaky")
        name_box.press("Tab")  # typed, then Tab: focus goes on to Start, not into a cell's folded code
        outputs(page).get_by_text("Config OK: run leaky, 20 steps", exact=False).first.wait_for()
        outputs(page).get_by_text("warm-up scaled to 1 step(s)", exact=False).first.wait_for()
        page.get_by_role("button", name="Start", exact=True).click()  # the next click counts
        assert wait_for_progress(page, "finished", 20, timeout_s=240) == 20
        assert message(page) == "finished at step 20 of 20."  # one Start: no "Busy training" from a second one
        assert json.loads((parent / "meta.json").read_text())["status"] == "finished"

        row = page.get_by_role("row").filter(has_text="mask_leak").first
        row.wait_for(timeout=60_000)
        row.get_by_role("checkbox").click()  # select the alert: the rewind form opens with the parent's values
        outputs(page).get_by_text("Rewind from the critical mask_leak", exact=False).first.wait_for()
        rewind_leak = page.locator("[role=slider]:visible").last
        rewind_leak.focus()
        rewind_leak.press("Home")  # the leak off in the branch
        branch_name = page.locator("input[placeholder='leaky-from-STEP']")
        branch_name.fill("leaky-fixed")
        branch_name.press("Enter")
        page.get_by_role("button", name="Rewind here (detached)", exact=True).click()
        wait_for(page, lambda: message(page).startswith("Rewound leaky to step 0 as leaky-fixed"),
                 f"the rewind message (now {message(page)!r})", 60)
        page.wait_for_timeout(3000)  # the run lists are rebuilt meanwhile: the click must not act again
        assert len(trainer_processes("leaky-fixed")) <= 1  # one process (or none left: 20 steps end quickly)
        assert wait_for_progress(page, "finished", 20, timeout_s=240) == 20
        outputs(page).get_by_text("Branch of leaky at step 0", exact=False).first.wait_for(timeout=60_000)
        wait_for_charts(page, 4)
        shoot(page, tmp_path / "rewind.png")
        assert_no_errors_and_no_xss(page)
        page.close()
    meta = json.loads((branch / "meta.json").read_text())
    assert meta["parent"]["run"] == "leaky" and meta["parent"]["changes"] == {"faults.mask_leak_fraction": 0.0}
    assert meta["status"] == "finished" and meta["attempt"] == 1 + 0  # a branch from step 0 has no copied rows
    log = (tmp_path / "runs" / ".logs" / "leaky-fixed.log").read_text()
    assert "already exists" not in log


def test_the_monitor_opens_a_run_watched_in_another_loop(browser, tmp_path: Path) -> None:
    """examples/own_loop.py writes through jepa_core.monitor; the monitor notebook opens its run as any other."""
    done = subprocess.run([sys.executable, str(REPO / "examples" / "own_loop.py"), "--steps", "60", "--name", "mine"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    run = tmp_path / "runs" / "mine"
    with edit_server("monitor.py", tmp_path, "--run", str(run)) as url:
        page = new_page(browser, TALL)
        page.goto(url)
        wait_for_charts(page, 4)
        outputs(page).get_by_text("status finished, last step 60", exact=False).first.wait_for()
        page.wait_for_timeout(1500)
        shoot(page, tmp_path / "own-loop-monitor.png")
        assert_no_errors_and_no_xss(page)
        page.close()
