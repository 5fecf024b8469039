"""Starting the explorer: its packages, its port, and what it says when it cannot start."""

from __future__ import annotations

import socket
from importlib import metadata

import pytest

from governed_broker.explore import server
from governed_broker.explore.server import ExplorerError, check_dependencies, pick_port


def test_a_missing_or_mismatched_extra_says_what_to_install(monkeypatch) -> None:
    real = metadata.version

    def without(name):
        def version(package):
            if package == name:
                raise metadata.PackageNotFoundError(package)
            return real(package)
        return version

    for missing in ("solara", "solara-assets"):
        monkeypatch.setattr(server.metadata, "version", without(missing))
        with pytest.raises(ExplorerError, match=r"governed-broker\[explore\]"):
            check_dependencies()
    monkeypatch.setattr(server.metadata, "version",
                        lambda p: "1.0" if p == "solara-assets" else "2.0")
    with pytest.raises(ExplorerError, match="must match"):
        check_dependencies()


def test_a_taken_port_is_refused_or_skipped() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        with pytest.raises(ExplorerError, match=f"port {port} .* in use"):
            pick_port("127.0.0.1", port)
    assert server.DEFAULT_PORT <= pick_port("127.0.0.1", None) < (
        server.DEFAULT_PORT + server.PORT_TRIES)


def _require_extra() -> None:
    import os

    try:
        check_dependencies()
    except ExplorerError as exc:
        if os.environ.get("RUN_BROWSER_TESTS") == "1":
            pytest.fail(f"RUN_BROWSER_TESTS=1 but {exc}")
        pytest.skip(str(exc))


def test_explore_refuses_a_directory_that_is_not_a_run(tmp_path, capsys) -> None:
    from governed_broker.cli import main

    _require_extra()
    assert main(["explore", str(tmp_path)]) == 2
    assert "not a run or sweep directory" in capsys.readouterr().err


def test_run_with_explore_serves_the_run_and_stops_with_it(experiments, tmp_path) -> None:
    """``run.py X.yaml --explore``.

    The explorer starts once the run has a directory, stays open after the run, and stops with the
    process (SIGTERM).
    """
    import re
    import subprocess
    import sys
    import time
    import urllib.request
    from pathlib import Path

    _require_extra()
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, str(root / "run.py"), str(experiments.write(experiments.data())),
         "--out", str(out), "--set", "years=3", "--explore", "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url, deadline = None, time.monotonic() + 120
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            found = re.search(r"explorer at (http://\S+/)\?token=\S+ ", line)
            url = found.group(1) if found else None
        assert url, "the explorer never announced its address with its token"
        with urllib.request.urlopen(url + "readyz", timeout=10) as response:
            assert response.status == 200
        for _ in range(50):  # the run's own lines come first
            if "stays open" in proc.stderr.readline():
                break
        else:
            raise AssertionError("the explorer did not say it stays open")
        assert (out / "manifest.json").is_file()  # the run finished, the explorer stays
        proc.terminate()
        assert proc.wait(timeout=30) == 0
        with pytest.raises(OSError):
            urllib.request.urlopen(url + "readyz", timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_the_report_links_to_where_the_explorer_serves() -> None:
    from governed_broker.analysis.report import EXPLORER_URL

    assert EXPLORER_URL == f"http://{server.DEFAULT_HOST}:{server.DEFAULT_PORT}/"
