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
#: Seconds an interrupted ``run`` waits for its coroutine to unwind.
CANCEL_WAIT_S = 2.0
#: Seconds ``close`` waits for the loop's remaining tasks to be cancelled.
CLOSE_WAIT_S = 10.0


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
        """Run ``coro`` on the loop and return its result (exceptions propagate).

        Interrupted while waiting (Ctrl-C), it cancels the coroutine and waits up to
        ``CANCEL_WAIT_S`` for it to unwind, so that the calls it awaits are told to stop and
        no task is left pending when the loop closes; then the interrupt propagates.
        """
        loop = self._loop or self._start()
        unwound = threading.Event()

        async def watched() -> T:
            try:
                return await coro
            finally:
                unwound.set()

        future = asyncio.run_coroutine_threadsafe(watched(), loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            unwound.wait(CANCEL_WAIT_S)
            raise

    def close(self) -> None:
        """Stop the loop and join its thread (idempotent)."""
        if self._loop is None:
            return
        loop = self._loop

        async def finish() -> None:  # cancel what is left (an interrupted run), then stop
            tasks = [t for t in asyncio.all_tasks(loop) if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            loop.stop()

        loop.call_soon_threadsafe(lambda: loop.create_task(finish()))
        assert self._thread is not None
        self._thread.join(CLOSE_WAIT_S)
        if not self._thread.is_alive():  # else a task ignored its cancellation: left to exit
            self._loop.close()
        self._loop = None
        self._thread = None
