"""Serving the explorer: Solara's server in a child process, on this machine only.

The app needs the optional ``explore`` extra (``pip install 'governed-broker[explore]'``;
``make setup`` installs it): Solara, and ``solara-assets``, which holds the JavaScript and CSS
that Solara otherwise fetches from a CDN, so the explorer works without internet access (on a
cluster node, on a laptop on a plane). Without them the explorer refuses to start and says
what to install: there is no fallback to a CDN.

The server listens on ``127.0.0.1`` unless told otherwise (and says so, with a warning, when
told to listen beyond this machine), runs in Solara's production mode, sends no usage
telemetry, and answers only requests that carry its access token (``explore.access``): the
address it prints holds the token. Closed browser sessions are freed after a few minutes
(``explore.serve``). Its log goes to a file whose path is printed, so the terminal shows one
line (the address) rather than the server's chatter.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from governed_broker.explore.access import ENV_TOKEN, TOKEN_PARAM, is_loopback, new_token
from governed_broker.explore.serve import CULL_AFTER_S

#: Environment variable that tells the app (a separate process) which directory to show.
ENV_TARGET = "GOVERNED_BROKER_EXPLORE"
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8765
#: Ports tried after the default one when it is taken (another explorer is open).
PORT_TRIES = 20
START_TIMEOUT_S = 120.0
INSTALL_HINT = ("pip install 'governed-broker[explore]' (in this repository: make setup, or "
                ".venv/bin/pip install -e '.[explore]')")


class ExplorerError(RuntimeError):
    """The explorer cannot start (missing packages, port taken, server failed).

    The message says what to do.
    """


def check_dependencies() -> None:
    """Raise ``ExplorerError`` unless Solara and its matching offline assets are installed."""
    try:
        solara = metadata.version("solara")
    except metadata.PackageNotFoundError:
        raise ExplorerError("the explorer needs Solara, which is not installed: "
                            + INSTALL_HINT) from None
    try:
        assets = metadata.version("solara-assets")
    except metadata.PackageNotFoundError:
        raise ExplorerError(
            f"the explorer needs solara-assets=={solara} (Solara's JavaScript, so that it works "
            f"offline), which is not installed: {INSTALL_HINT}") from None
    if assets != solara:
        raise ExplorerError(f"solara {solara} and solara-assets {assets} differ; the assets "
                            f"must match Solara's version: {INSTALL_HINT}")


def pick_port(host: str, port: int | None) -> int:
    """``port`` when given and free; else the first free port from ``DEFAULT_PORT`` on.

    Raises:
        ExplorerError: the requested port, or every port tried, is taken.
    """
    candidates = [port] if port is not None else range(DEFAULT_PORT, DEFAULT_PORT + PORT_TRIES)
    for candidate in candidates:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, candidate))
                return candidate
            except OSError:
                continue
    if port is not None:
        raise ExplorerError(f"port {port} on {host} is in use; pass another --port")
    raise ExplorerError(f"ports {DEFAULT_PORT}-{DEFAULT_PORT + PORT_TRIES - 1} on {host} are all "
                        "in use; pass a free one with --port")


def exposure_warning(host: str) -> str | None:
    """The warning for a server bound beyond this machine (None: loopback only)."""
    if is_loopback(host):
        return None
    return (f"warning: --host {host} serves the explorer beyond this machine: whoever can "
            "reach this address and learns its token can read every prompt and reply of the "
            "run, and the connection is not encrypted (http). Unless that is what you want, "
            f"use the default --host {DEFAULT_HOST} and an SSH tunnel "
            "(ssh -L 8765:127.0.0.1:8765 this-host)")


class Explorer:
    """One explorer server process.

    Args:
        directory: The run or sweep directory to show (a running run's ``<out>``).
        host: Interface to listen on.
        port: Port (None: the first free one from 8765).
        cull_after_s: Seconds a closed browser session is kept (``serve.CULL_AFTER_S``).

    Attributes:
        url: The address to open: the server's root with its access token.
    """

    def __init__(self, directory: Path, host: str = DEFAULT_HOST, port: int | None = None,
                 cull_after_s: float = CULL_AFTER_S):
        self.directory = Path(directory)
        self.host = host
        self.port = pick_port(host, port)
        self.cull_after_s = cull_after_s
        self._token = new_token()
        self.base = f"http://{host}:{self.port}/"
        self.url = self.link()
        self.log = Path(tempfile.mkstemp(prefix="governed-broker-explore-", suffix=".log")[1])
        self.process: subprocess.Popen | None = None
        self._starter: threading.Thread | None = None
        self._cancelled = threading.Event()

    def link(self, query: str = "") -> str:
        """The address of a view with the access token.

        Args:
            query: The view, e.g. ``tab=decisions&status=rejected`` ("": the first page).
        """
        return f"{self.base}?{query + '&' if query else ''}{TOKEN_PARAM}={self._token}"

    def start_when_present(self, present: Callable[[], bool],
                           announce: Callable[[str], None]) -> None:
        """Start the server in a background thread once the directory exists.

        As soon as ``present()`` (the run or sweep directory exists); then ``announce`` its address
        or why it failed.
        """

        def run() -> None:
            while not present():
                if self._cancelled.wait(0.5):
                    return
            try:
                announce(f"explorer at {self.start()} (server log: {self.log})")
            except ExplorerError as exc:
                announce(f"the explorer could not start: {exc}")

        self._starter = threading.Thread(target=run, daemon=True, name="explorer-start")
        self._starter.start()

    def start(self, timeout_s: float = START_TIMEOUT_S) -> str:
        """Start the server and wait until it answers; return its address.

        Raises:
            ExplorerError: the server exited or did not answer in time (with its log's tail).
        """
        env = dict(os.environ)
        env[ENV_TARGET] = str(self.directory.resolve())
        env[ENV_TOKEN] = self._token  # the environment: other users can read command lines
        # an argument list, never a shell string
        command = [sys.executable, "-m", "governed_broker.explore.serve", "--host", self.host,
                   "--port", str(self.port), "--cull-after", f"{self.cull_after_s:g}"]
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(command, env=env, stdout=log,
                                            stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not self._cancelled.is_set():
            if self.process.poll() is not None:
                raise ExplorerError(f"the explorer server exited with code "
                                    f"{self.process.returncode}:\n{self._log_tail()}")
            if _answers(self.base + "readyz"):
                return self.url
            time.sleep(0.2)
        self._terminate()
        raise ExplorerError(f"the explorer server did not answer within {timeout_s:.0f} s:\n"
                            f"{self._log_tail()}")

    def started(self) -> bool:
        """Wait for a background start to finish; whether the server is running."""
        if self._starter is not None:
            self._starter.join()
        return self.process is not None and self.process.poll() is None

    def wait(self, announce: Callable[[], None] | None = None) -> int:
        """Block until the server exits (Ctrl-C or SIGTERM stops it).

        Return its exit code. A server started in the background is waited for first. ``announce``
        runs once SIGTERM is handled, so whoever reads the announcement may terminate the process at
        once.
        """
        previous = _stop_on_sigterm()
        try:
            if announce is not None:
                announce()
            if self._starter is not None:
                self._starter.join()
            if self.process is None:
                return 0
            return self.process.wait()
        except KeyboardInterrupt:
            return 0
        finally:
            self.stop()
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)

    def stop(self) -> None:
        """Stop the server (terminate, then kill after 10 s).

        A server not yet started in the background never starts.
        """
        self._cancelled.set()
        if self._starter is not None and self._starter is not threading.current_thread():
            self._starter.join()
        self._terminate()

    def _terminate(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def _log_tail(self, lines: int = 20) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:]) + f"\n(full log: {self.log})"


def _stop_on_sigterm():
    """Make SIGTERM end the wait like Ctrl-C, so the server never outlives this process.

    Returns the previous handler (None when not in the main thread, where it cannot be set).
    """
    if threading.current_thread() is not threading.main_thread():
        return None

    def interrupt(_signum, _frame):
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, interrupt)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False
