"""The explorer in a real headless Chromium.

Load a committed sample run, click a household on the map, and check that its timeline shows that
household's real prompt and rules.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from governed_broker.explore.charts import pixel_of
from governed_broker.explore.layout import household_layout
from governed_broker.explore.run_view import load_view

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

EMBEDDED = FIXTURES / "embedded_llm_run"
SCRIPTED = FIXTURES / "scripted_broker_run"
WAIT_S = 90


def _wait_for(driver, condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if condition(driver):
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out after {WAIT_S} s waiting for {what}")


def _text(driver) -> str:
    return driver.find_element("tag name", "body").text


def _first_prompt(run: Path, agent_id: int, year: int) -> str:
    """The user message of the household's first ask of ``year``, from the run's call log."""
    record = next(json.loads(line) for line in (run / "decisions.jsonl").open()
                  if json.loads(line)["agent_id"] == agent_id
                  and json.loads(line)["year"] == year)
    seed = record["attempts"][0]["seed"]
    with sqlite3.connect(f"{run.absolute().as_uri()}/llm_calls.sqlite?mode=ro&immutable=1",
                         uri=True) as conn:
        (messages,) = conn.execute("SELECT messages_json FROM calls WHERE seed = ?",
                                   (seed,)).fetchone()
    return json.loads(messages)[-1]["content"]


def _severe_console_errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def test_clicking_a_household_shows_its_real_prompt_and_rules(browser, explorer_of,
                                                              artifacts) -> None:
    before = sorted(p.name for p in EMBEDDED.iterdir())
    link = explorer_of(EMBEDDED)
    browser.get(link("tab=households"))
    _wait_for(browser, lambda d: d.find_elements("css selector", ".gb-neighbourhood canvas"),
              "the neighbourhood chart")
    view = load_view(EMBEDDED, live=False)
    agent = 3
    chart = browser.find_element("css selector", ".gb-neighbourhood")
    size = chart.size
    x, y = pixel_of(household_layout(view).positions[agent], size["width"], size["height"])
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(browser).move_to_element_with_offset(
        chart, int(x - size["width"] / 2), int(y - size["height"] / 2)).click().perform()
    _wait_for(browser, lambda d: f"Household {agent}:" in _text(d), "the household's timeline")
    last = view.last_year
    prompt = _first_prompt(EMBEDDED, agent, last)
    _wait_for(browser, lambda d: prompt.splitlines()[0] in _text(d), "the prompt's first line")
    page = _text(browser)
    for line in prompt.splitlines():  # the whole message, as the model received it
        assert line.strip() in page, f"prompt line missing from the page: {line!r}"
    record = view.decisions[(agent, last)]
    evaluated = [r["id"] for r in record["attempts"][0]["rules"]]
    assert evaluated, "the sample decision evaluated no rule"
    for rule in evaluated:
        assert rule in page
    fired = [r["id"] for r in record["attempts"][0]["rules"] if r["fired"]]
    print("PAGE>>>", page)
    assert f"Rules fired: {', '.join(fired) or 'none'}" in page
    assert record["attempts"][0]["raw"].splitlines()[0].strip() in page
    browser.save_screenshot(str(artifacts / "explorer_household_timeline.png"))
    assert _severe_console_errors(browser) == []  # every asset served locally, no script error
    assert sorted(p.name for p in EMBEDDED.iterdir()) == before  # nothing written into the run


def test_a_filtered_decision_opens_with_the_rules_that_fired(browser, explorer_of,
                                                             artifacts) -> None:
    link = explorer_of(SCRIPTED)
    browser.get(link("tab=decisions"))
    view = load_view(SCRIPTED, live=False)
    # the first decision of the sample with several rules fired
    (agent, year), fired = next(
        (key, ids) for key, record in sorted(view.decisions.items(), key=lambda kv: kv[0][::-1])
        if len(ids := sorted({r["id"] for r in record["rules_fired"]})) >= 2)
    label = f"year {year} · household {agent} ·"
    _wait_for(browser, lambda d: label in _text(d), "the decision list")
    button = next(b for b in browser.find_elements("css selector", ".gb-decision")
                  if label in b.text)
    button.click()
    _wait_for(browser, lambda d: f"Household {agent}:" in _text(d), "the household's timeline")
    page = _text(browser)
    # the first attempt's line lists them in the order they were evaluated
    lines = [x.removeprefix("Rules fired: ").split(", ") for x in page.splitlines()
             if x.startswith("Rules fired: ")]
    assert lines and sorted(lines[0]) == fired
    assert "this run kept no prompts" in page  # the scripted sample dropped its call log
    browser.save_screenshot(str(artifacts / "explorer_rules_fired.png"))
    assert _severe_console_errors(browser) == []


@pytest.mark.parametrize("run", [EMBEDDED, SCRIPTED])
def test_the_sample_runs_have_what_the_browser_tests_look_for(run: Path) -> None:
    view = load_view(run, live=False)
    assert view.last_year >= 1 and view.decisions


def test_a_running_run_is_shown_live_and_followed_when_it_finishes(browser, explorer_of,
                                                                   partial_run, tmp_path,
                                                                   artifacts) -> None:
    out = tmp_path / "out"
    work = partial_run(out, years=2)
    link = explorer_of(out)
    browser.get(link())
    _wait_for(browser, lambda d: "years 2 so far, running" in _text(d), "the live run")
    for name in ("model_yearly.csv", "agents_yearly.csv", "decisions.jsonl"):
        shutil.copy(EMBEDDED / name, work / name)  # the run writes years 3 and 4
    _wait_for(browser, lambda d: "years 4 so far, running" in _text(d), "the new years")
    for name in ("config.yaml", "manifest.json", "reflections.jsonl"):
        shutil.copy(EMBEDDED / name, work / name)
    work.rename(out)  # finished: the runner renames <out>.partial to <out>
    _wait_for(browser, lambda d: "years 4 of 4, finished" in _text(d), "the finished run")
    browser.save_screenshot(str(artifacts / "explorer_live_run_finished.png"))


def test_the_institutions_tab_lists_each_decision(browser, explorer_of, institutions_run,
                                                  artifacts) -> None:
    link = explorer_of(institutions_run)
    browser.get(link("tab=institutions"))
    _wait_for(browser, lambda d: "Decisions (institutions.jsonl): 6" in _text(d),
              "the institutions' decisions")
    text = _text(browser)
    lines = text.splitlines()
    government = next(i for i, line in enumerate(lines)
                      if line.startswith("year 1 · government · llm:scripted/"))
    assert lines[government].endswith("· retry_approved · 1 re-ask(s)")
    # its first reply asked for more than the fund holds: the rule, the proposal, what held
    assert "rules fired: budget_within_funds (ERROR, attempt 0)" in lines[government:]
    assert "proposed: subsidy_share 0.5, grant_budget_usd 90,000,000, buyout_budget_usd " \
           "90,000,000" in lines[government:]
    assert any(line.startswith("year 3 · insurer · llm:scripted/")
               and line.endswith("· approved") for line in lines)
    assert "Levers and money by year" in text
    browser.save_screenshot(str(artifacts / "explorer_institutions.png"))
    assert _severe_console_errors(browser) == []


def test_the_explorer_needs_its_token_then_keeps_it_in_a_cookie(browser, explorer_of) -> None:
    import http.client
    from urllib.parse import urlsplit

    link = explorer_of(SCRIPTED)
    base = link().split("?")[0]
    browser.get(base + "?tab=decisions")  # another user on the node, without the token
    _wait_for(browser, lambda d: "needs its access token" in _text(d), "the refusal")
    assert "household" not in _text(browser).lower()
    where = urlsplit(base)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=10)
    conn.request("GET", "/jupyter/api/kernels/abc/channels", headers={
        "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
    assert conn.getresponse().status == 403  # the page's WebSocket is refused too
    conn.close()
    browser.get_log("browser")  # the refused page's 403, read and dropped
    browser.get(link("tab=decisions"))  # the printed address
    _wait_for(browser, lambda d: "· household" in _text(d), "the decision list")
    assert "token=" not in browser.current_url  # the token left the address bar
    browser.get(base + "?tab=overview")  # later visits: the cookie
    _wait_for(browser, lambda d: "decisions by" in _text(d), "the overview")
    assert _severe_console_errors(browser) == []


def test_a_closed_session_is_freed_after_the_cull_time(browser) -> None:
    """N6: a closed tab's session is freed ``cull_after_s`` after the tab closes.

    It was kept for Solara's 24 h (about 230 MB each on a 2,000-household run).
    """
    import urllib.request

    from governed_broker.explore.access import cookie_name
    from governed_broker.explore.server import Explorer

    explorer = Explorer(SCRIPTED, cull_after_s=2)
    explorer.start()

    def kernels() -> int:
        request = urllib.request.Request(explorer.base + "resourcez", headers={
            "Cookie": f"{cookie_name(explorer.port)}={explorer.link().split('token=')[1]}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())["kernels"]["total"]

    try:
        browser.get(explorer.link("tab=decisions"))
        _wait_for(browser, lambda d: "· household" in _text(d), "the decision list")
        assert kernels() == 1
        browser.quit()  # the browser goes away without a word (no page-close message)
        _wait_for(browser, lambda d: kernels() == 0, "the closed session to be freed")
    finally:
        explorer.stop()
