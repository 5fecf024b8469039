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
