"""One pool of server hosts for the HTTP backends (Ollama, OpenAI-compatible).

A run may spread its households over several servers, each serving ``concurrency`` requests at
once (``OLLAMA_NUM_PARALLEL``, llama.cpp ``--parallel``). ``HostPool`` sends each request to the
host with the fewest requests in flight (the first listed on ties), waits for a free slot there
and holds the host's client, so both backends share one dispatch rule instead of each keeping
its own copy. Clients and semaphores belong to one event loop; a new loop (a new ``asyncio.run``)
gets fresh ones.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _LoopState:
    """Clients, slot semaphores and in-flight counts bound to one event loop."""

    loop: asyncio.AbstractEventLoop
    clients: dict[str, Any]
    slots: dict[str, asyncio.Semaphore]
    in_flight: dict[str, int] = field(default_factory=dict)


class HostPool:
    """Least-loaded dispatch over servers with a fixed number of slots each.

    Args:
        hosts: Server URLs, in order of preference on ties (trailing ``/`` removed).
        concurrency: Requests in flight per host.
        make_client: Builds the client of one host (called once per host and event loop).
        close_client: Closes a client (awaited by ``aclose``).
    """

    def __init__(self, hosts: Sequence[str], concurrency: int,
                 make_client: Callable[[str], Any],
                 close_client: Callable[[Any], Awaitable[None]]) -> None:
        if not hosts:
            raise ValueError("a host pool needs at least one host")
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.hosts = tuple(h.rstrip("/") for h in hosts)
        self.concurrency = concurrency
        self._make_client = make_client
        self._close_client = close_client
        self._state: _LoopState | None = None

    @property
    def max_concurrency(self) -> int:
        """Requests in flight over all hosts."""
        return self.concurrency * len(self.hosts)

    def _loop_state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        if self._state is None or self._state.loop is not loop:
            self._state = _LoopState(
                loop=loop,
                clients={h: self._make_client(h) for h in self.hosts},
                slots={h: asyncio.Semaphore(self.concurrency) for h in self.hosts},
                in_flight=dict.fromkeys(self.hosts, 0),
            )
        return self._state

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[tuple[str, Any]]:
        """Hold a slot on the least-loaded host: yields ``(host, client)``.

        The host is counted as loaded from the moment it is chosen (also while waiting for its
        slot), and released when the block ends, however it ends (errors, cancellation).
        """
        state = self._loop_state()
        host = min(self.hosts, key=lambda h: state.in_flight[h])
        state.in_flight[host] += 1
        try:
            async with state.slots[host]:
                yield host, state.clients[host]
        finally:
            state.in_flight[host] -= 1

    def in_flight(self) -> dict[str, int]:
        """Requests in flight per host in the current loop (all zero before the first)."""
        if self._state is None:
            return dict.fromkeys(self.hosts, 0)
        return dict(self._state.in_flight)

    async def aclose(self) -> None:
        """Close this loop's clients (a pool used in another loop just forgets its state)."""
        if self._state is not None and self._state.loop is asyncio.get_running_loop():
            for client in self._state.clients.values():
                await self._close_client(client)
        self._state = None
