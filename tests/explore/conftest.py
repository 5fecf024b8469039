"""Fixtures of the explorer's tests: the committed sample runs and a headless Chromium.

The browser tests drive Debian's ``chromium`` with its ``chromedriver`` (packages ``chromium``
and ``chromium-driver``) through Selenium, against the real explorer server. Without them (or
without the ``explore`` extra) they skip with the reason; with ``RUN_BROWSER_TESTS=1`` (set it in
CI, which installs them: ``.ci/run``) they fail instead of skipping. Screenshots are saved as
test artefacts under ``$BROWSER_ARTIFACTS`` (default ``test-artifacts/`` in the repository).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = REPO_ROOT / "tests" / "fixtures"
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--window-size=1600,1100",
                  # every name but this machine's fails to resolve: the page must load offline
                  "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1")


def _browser_missing() -> str | None:
    for program in ("chromium", "chromedriver"):
        if shutil.which(program) is None:
            return (f"{program} is not installed (Debian: apt-get install -y chromium "
                    "chromium-driver)")
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    from governed_broker.explore.server import ExplorerError, check_dependencies

    try:
        check_dependencies()
    except ExplorerError as exc:
        return str(exc)
    return None


def require_browser() -> None:
    """Skip (or, with RUN_BROWSER_TESTS=1, fail) when the browser test cannot run here."""
    reason = _browser_missing()
    if reason is None:
        return
    if os.environ.get("RUN_BROWSER_TESTS") == "1":
        pytest.fail(f"RUN_BROWSER_TESTS=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture
def artifacts() -> Path:
    """Where the browser tests save screenshots."""
    path = Path(os.environ.get("BROWSER_ARTIFACTS", REPO_ROOT / "test-artifacts"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def browser() -> Iterator:
    """A headless Chromium (a fresh profile) driven by Selenium; its console log is kept."""
    require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    driver.set_page_load_timeout(120)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def explorer_of():
    """Start the real explorer server on a directory; stopped after the test.

    Returns the server's ``link``: the address of a view (``link("tab=decisions")``) with its
    token.
    """
    started = []

    def start(directory: Path):
        require_browser()
        from governed_broker.explore.server import Explorer

        explorer = Explorer(directory)
        started.append(explorer)
        explorer.start()
        return explorer.link

    yield start
    for explorer in started:
        explorer.stop()


@pytest.fixture
def partial_run():
    """Make ``<out>.partial``.

    The embedded sample run as it was while running, with ``years`` complete years and the next one
    half written, no manifest or config yet.
    """

    def make(out: Path, years: int) -> Path:
        source = FIXTURES / "embedded_llm_run"
        work = out.with_name(out.name + ".partial")
        work.mkdir()
        for name in ("memory.sqlite", "llm_calls.sqlite"):
            shutil.copy(source / name, work / name)
        for name in ("model_yearly.csv", "agents_yearly.csv"):
            lines = (source / name).read_text().splitlines(keepends=True)
            kept = [lines[0]] + [x for x in lines[1:] if int(x.split(",")[0]) <= years + 1]
            text = "".join(kept)
            (work / name).write_text(text[: len(text) - 7])  # the last line cut mid-way
        records = [json.loads(x) for x in (source / "decisions.jsonl").read_text().splitlines()]
        text = "".join(json.dumps(r) + "\n" for r in records if r["year"] <= years + 1)
        (work / "decisions.jsonl").write_text(text[:-20])
        return work

    return make


@pytest.fixture(scope="module")
def institutions_run(tmp_path_factory) -> Path:
    """A finished institutions run with a scripted LLM government and insurer.

    ``experiments/institutions.yaml`` with ``tests/fixtures/scripted_institutions.yaml`` (the
    government first asks for more than its funds, a rule fires and it is asked again) and baseline
    households: 30 households, 3 years.
    """
    from governed_broker.config import load_experiment
    from governed_broker.runner import run_experiment

    llm = {"backend": "scripted", "model": "institutions", "cache": {"mode": "off"},
           "script": str(FIXTURES / "scripted_institutions.yaml")}
    config = load_experiment(REPO_ROOT / "experiments" / "institutions.yaml", [
        "population.size=30", "years=3", "outputs.plots=false", f"llm={json.dumps(llm)}",
        "institutions.government.maker=llm", "institutions.insurer.maker=llm",
        "institutions.government.appropriation_per_household_usd=1000"])
    out = tmp_path_factory.mktemp("institutions") / "run"
    run_experiment(config, out, progress=False)
    return out
