"""The audit as the explorer holds it (explore.audit.AuditRecords).

An index into the file, each record read when it is shown, and one view shared by every
session (run_view.SharedViews).
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

from governed_broker.explore.audit import AuditRecords, laundering_of
from governed_broker.explore.run_view import SharedViews

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
EMBEDDED = FIXTURES / "embedded_llm_run"


def _records() -> list[dict]:
    return [json.loads(line) for line in (EMBEDDED / "decisions.jsonl").open()]


def test_records_are_read_from_the_file_as_they_were_written(tmp_path) -> None:
    path = tmp_path / "decisions.jsonl"
    shutil.copy(EMBEDDED / "decisions.jsonl", path)
    with open(path, "a") as f:
        f.write('{"agent_id": 1, "year": 2')  # a running run's half-written last line
    records = _records()
    audit = AuditRecords(path, last_year=3)
    kept = {(r["agent_id"], r["year"]): r for r in records if r["year"] <= 3}
    assert dict(audit) == kept and len(audit) == len(kept)
    for key, record in kept.items():
        assert audit.fired(key) == tuple(sorted({x["id"] for x in record["rules_fired"]}))
        assert audit.laundering(key) == tuple(laundering_of(record))
    assert audit.rule_ids() == sorted({i for ids in map(audit.fired, kept) for i in ids})
    assert AuditRecords(tmp_path / "none.jsonl", 3) == {}


def test_a_record_is_still_read_after_the_running_run_is_renamed(tmp_path) -> None:
    work = tmp_path / "out.partial"
    work.mkdir()
    shutil.copy(EMBEDDED / "decisions.jsonl", work / "decisions.jsonl")
    audit = AuditRecords(work / "decisions.jsonl", last_year=99)
    work.rename(tmp_path / "out")  # the run finished while its page was open
    key = next(iter(audit))
    assert audit[key]["agent_id"] == key[0]
    got = []
    threads = [threading.Thread(target=lambda: got.extend(dict(audit).items()))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 * len(audit)  # several sessions' threads read at once


def test_sessions_share_one_view_until_a_file_changes(tmp_path) -> None:
    run = tmp_path / "run"
    shutil.copytree(EMBEDDED, run)
    views = SharedViews()
    first, problem = views.get(run)
    assert problem is None and views.get(run)[0] is first
    with open(run / "model_yearly.csv", "a") as f:
        f.write("\n")  # a file the view read has changed
    assert views.get(run)[0] is not first
