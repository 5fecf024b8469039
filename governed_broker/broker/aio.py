"""A private event loop on a background thread, for the synchronous ``DecisionMaker`` API.

The world calls ``decide`` synchronously; the broker decides a year's households concurrently
with asyncio. One long-lived loop (rather than ``asyncio.run`` per year) keeps backends'
connections valid across years, and running it on its own thread lets ``decide`` be called
from code that already runs an event loop (Jupyter).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """Runs coroutines to completion on one event loop owned by a daemon thread."""

    def __init__(self, name: str = "governed-broker-loop") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _start(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, name=self._name, daemon=True)
        self._thread.start()
        self._loop = loop
        return loop

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and return its result (exceptions propagate)."""
        loop = self._loop or self._start()
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def close(self) -> None:
        """Stop the loop and join its thread (idempotent)."""
        if self._loop is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        assert self._thread is not None
        self._thread.join()
        self._loop.close()
        self._loop = None
        self._thread = None
