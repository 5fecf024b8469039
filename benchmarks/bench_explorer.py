"""Install size, start time and memory of the run explorer (docs/explorer.md).

Usage: python benchmarks/bench_explorer.py [RUN_DIR] [--repeat 3] [--screenshot PNG]
       python benchmarks/bench_explorer.py RUN_DIR --sessions 10 [--cull-after 120]

Prints the disk size of the packages the ``explore`` extra adds (Solara and what it pulls in
beyond the core install, and solara-assets' offline JavaScript), then, ``--repeat`` times: the
seconds from starting the server to its first answer, and (when Debian's chromium and
chromedriver are installed) the seconds until a headless browser shows the first page. With
``--screenshot`` it saves the households tab of the first household as a PNG (the README's).

With ``--sessions N`` it measures the server's memory instead (resident set of the server
process, MB): after it starts, after each of N browser sessions that open the run (the
overview, then the households tab with a household's timeline, then the decisions tab) and
close, and once the closed sessions are freed (``--cull-after`` seconds later, plus 30 s).
Make a 2,000-household run to measure with, e.g. the demo with scripted replies::

    python run.py experiments/demo.yaml --out /tmp/run2000 --set population.size=2000 \
        --set years=10 --set llm.backend=scripted \
        --set llm.script=tests/fixtures/scripted_governance.yaml --set llm.model=null \
        --set llm.model_path=null --set 'llm.cache.mode="off"' --set outputs.plots=false \
        --set limits.max_llm_calls=1000000
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

from governed_broker.explore.serve import CULL_AFTER_S
from governed_broker.explore.server import Explorer

ROOT = Path(__file__).resolve().parent.parent
#: The distributions the ``explore`` extra adds to a core install (pip's view on 2026-11-25).
EXTRA_DISTRIBUTIONS = (
    "solara", "solara-server", "solara-ui", "solara-assets", "ipyvue", "ipyvuetify",
    "ipywidgets", "widgetsnbextension", "jupyterlab_widgets", "reacton", "starlette",
    "uvicorn", "websockets", "watchfiles", "watchdog", "rich-click", "rich", "markdown",
    "pymdown-extensions", "jinja2", "humanize", "cachetools", "click", "requests", "urllib3",
    "charset-normalizer", "filelock", "markdown-it-py", "mdurl",
)


def _size_mb(name: str) -> float:
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return 0.0
    total = 0
    for file in dist.files or []:
        path = Path(dist.locate_file(file))
        if path.is_file():
            total += path.stat().st_size
    return total / 1e6


def _browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,900",
                 f"--user-data-dir={tempfile.mkdtemp()}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def _rss_mb(pid: int) -> float:
    """Resident memory of a process and its children (MB)."""
    import psutil

    process = psutil.Process(pid)
    return sum(p.memory_info().rss for p in [process, *process.children(recursive=True)]) / 1e6


def _wait_text(driver, text: str, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in driver.find_element("tag name", "body").text:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the page never showed {text!r}")
        time.sleep(0.2)


def sessions(run: Path, count: int, cull_after_s: float) -> None:
    """Memory of the server over ``count`` opened-and-closed browser sessions."""
    explorer = Explorer(run, cull_after_s=cull_after_s)
    explorer.start()
    pid = explorer.process.pid
    try:
        print(f"server started: {_rss_mb(pid):.0f} MB")
        for number in range(1, count + 1):
            driver = _browser()
            try:
                driver.get(explorer.link())
                _wait_text(driver, "decisions by")
                driver.get(explorer.link("tab=households&household=3"))
                _wait_text(driver, "Household 3:")
                driver.get(explorer.link("tab=decisions"))
                _wait_text(driver, "· household")
            finally:
                driver.quit()
            print(f"after session {number} (opened, closed): {_rss_mb(pid):.0f} MB", flush=True)
        wait = cull_after_s + 30
        time.sleep(wait)
        print(f"{wait:.0f} s after the last session closed: {_rss_mb(pid):.0f} MB")
    finally:
        explorer.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", nargs="?", type=Path,
                        default=ROOT / "tests" / "fixtures" / "embedded_llm_run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--screenshot", type=Path, default=None)
    parser.add_argument("--sessions", type=int, default=0)
    parser.add_argument("--cull-after", type=float, default=CULL_AFTER_S)
    args = parser.parse_args()
    if args.sessions:
        sessions(args.run, args.sessions, args.cull_after)
        return 0
    sizes = {name: _size_mb(name) for name in EXTRA_DISTRIBUTIONS}
    print(f"explore extra: {sum(sizes.values()):.0f} MB on disk, of which solara-assets "
          f"{sizes['solara-assets']:.0f} MB")
    can_browse = shutil.which("chromium") and shutil.which("chromedriver")
    for attempt in range(args.repeat):
        explorer = Explorer(args.run)
        t0 = time.perf_counter()
        url = explorer.start()
        ready = time.perf_counter() - t0
        shown = None
        if can_browse:
            driver = _browser()
            try:
                driver.get(url)
                while "Benchmark fit" not in driver.find_element("tag name", "body").text:
                    time.sleep(0.1)
                shown = time.perf_counter() - t0
                if args.screenshot and attempt == 0:
                    driver.get(explorer.link("tab=households&household=3"))
                    while "Attempt 0" not in driver.find_element("tag name", "body").text:
                        time.sleep(0.1)
                    time.sleep(2)  # let the charts draw
                    driver.save_screenshot(str(args.screenshot))
            finally:
                driver.quit()
        explorer.stop()
        page = "no browser" if shown is None else f"first page shown after {shown:.1f} s"
        print(f"start {attempt + 1}: server answering after {ready:.1f} s, {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
