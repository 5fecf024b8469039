"""Install size and start time of the run explorer (docs/explorer.md).

Usage: python benchmarks/bench_explorer.py [RUN_DIR] [--repeat 3] [--screenshot PNG]

Prints the disk size of the packages the ``explore`` extra adds (Solara and what it pulls in
beyond the core install, and solara-assets' offline JavaScript), then, ``--repeat`` times: the
seconds from starting the server to its first answer, and (when Debian's chromium and
chromedriver are installed) the seconds until a headless browser shows the first page. With
``--screenshot`` it saves the households tab of the first household as a PNG (the README's).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", nargs="?", type=Path,
                        default=ROOT / "tests" / "fixtures" / "embedded_llm_run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--screenshot", type=Path, default=None)
    args = parser.parse_args()
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
