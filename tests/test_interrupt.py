"""Ctrl-C on a run: it stops within seconds, says how to resume, and resuming finishes it.

A real ``run.py``-like process runs the demo on the real embedded backend class (worker
thread, streamed replies) in front of a fake model server (``interrupt_backend``), gets SIGINT
in its second year, and must end quickly with exit code 130, no traceback and no asyncio
noise, and a message that says how to resume; the same command then resumes from year 2.
(``tests/llm/test_llm_real_model.py`` does the same with the real model.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOISE = ("Traceback", "Task was destroyed", "Event loop is closed", "Exception ignored",
         "never awaited")


def _command(out: Path) -> list[str]:
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import interrupt_backend; "
            "interrupt_backend.install(); from governed_broker.cli import main; "
            "sys.exit(main(sys.argv[2:]))")
    return [sys.executable, "-c", code, str(ROOT / "tests"), "run",
            str(ROOT / "experiments" / "demo.yaml"), "--out", str(out), "--set",
            "llm.backend=fake_embedded", "--set", "llm.model=null", "--set",
            "llm.cache.mode=off", "--set", "outputs.plots=false"]


def test_ctrl_c_stops_within_seconds_and_the_same_command_resumes(tmp_path) -> None:
    model = tmp_path / "fake.gguf"
    model.write_bytes(b"\0" * 64)
    out = tmp_path / "demo"
    slow = tmp_path / "slow"
    env = {**os.environ, "FAKE_MODEL_FILE": str(model), "FAKE_PROMPT_S": "0.3",
           "FAKE_TOKEN_S": "0.02", "FAKE_SLOW_FLAG": str(slow)}
    proc = subprocess.Popen(_command(out), env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    checkpoint = tmp_path / "demo.partial" / "checkpoints"
    deadline = time.monotonic() + 120
    while not any(checkpoint.glob("year-*")) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    slow.touch()  # year 2's calls take 15 s each unless stopped
    time.sleep(1.0)  # inside year 2: a call streaming
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    took = time.monotonic() - sent
    assert proc.returncode == 130, err
    assert took < 5, f"{took:.1f} s after Ctrl-C"
    assert not [n for n in NOISE if n in err], err
    assert "keeps years 1-1 of 4; run the same command again to resume from year 2" in err, err

    slow.unlink()
    env["FAKE_PROMPT_S"] = env["FAKE_TOKEN_S"] = "0"
    done = subprocess.run(_command(out), env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["resumed_from_year"] == 1
