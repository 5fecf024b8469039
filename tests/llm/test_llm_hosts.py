"""The host pool shared by the HTTP backends: least-loaded dispatch, slots, clients per loop."""

from __future__ import annotations

import asyncio

import pytest

from governed_broker.llm.hosts import HostPool


class Client:
    def __init__(self, host: str) -> None:
        self.host, self.closed = host, False

    async def close(self) -> None:
        self.closed = True


def pool(hosts=("http://a", "http://b/"), concurrency=2) -> tuple[HostPool, list[Client]]:
    made: list[Client] = []

    def make(host: str) -> Client:
        made.append(Client(host))
        return made[-1]

    return HostPool(hosts, concurrency, make, lambda c: c.close()), made


def test_requests_spread_to_the_least_loaded_host_and_wait_for_a_slot() -> None:
    p, _ = pool()
    seen: list[str] = []
    peak: dict[str, int] = {}

    async def one(release: asyncio.Event) -> None:
        async with p.slot() as (host, client):
            assert client.host == host
            seen.append(host)
            for h, n in p.in_flight().items():
                peak[h] = max(peak.get(h, 0), n)
            await release.wait()

    async def main() -> None:
        release = asyncio.Event()
        tasks = [asyncio.create_task(one(release)) for _ in range(6)]
        await asyncio.sleep(0.01)
        assert p.in_flight() == {"http://a": 3, "http://b": 3}  # 2 served + 1 waiting each
        assert sorted(seen) == ["http://a", "http://a", "http://b", "http://b"]  # 2 slots each
        release.set()
        await asyncio.gather(*tasks)
        assert p.in_flight() == {"http://a": 0, "http://b": 0}

    asyncio.run(main())
    assert p.max_concurrency == 4 and p.hosts == ("http://a", "http://b")
    assert seen[:2] == ["http://a", "http://b"]  # ties go to the first listed host


def test_errors_and_cancellation_release_the_slot() -> None:
    p, _ = pool(hosts=("http://a",), concurrency=1)

    async def main() -> None:
        with pytest.raises(RuntimeError):
            async with p.slot():
                raise RuntimeError("server said no")
        task = asyncio.create_task(_hold(p))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert p.in_flight() == {"http://a": 0}
        async with asyncio.timeout(1):
            async with p.slot() as (host, _):
                assert host == "http://a"

    asyncio.run(main())


async def _hold(p: HostPool) -> None:
    async with p.slot():
        await asyncio.sleep(10)


def test_each_event_loop_gets_its_own_clients_and_aclose_closes_them() -> None:
    p, made = pool()

    async def use() -> None:
        async with p.slot():
            pass

    asyncio.run(use())
    asyncio.run(use())  # a new loop: the old loop's clients cannot be reused
    assert len(made) == 4

    async def use_and_close() -> None:
        await use()
        await p.aclose()

    asyncio.run(use_and_close())
    assert len(made) == 6 and all(c.closed for c in made[4:])


@pytest.mark.parametrize(("hosts", "concurrency", "needle"), [
    ((), 1, "at least one host"), (("http://a",), 0, "concurrency"),
])
def test_bad_pools_are_refused(hosts, concurrency, needle) -> None:
    with pytest.raises(ValueError, match=needle):
        HostPool(hosts, concurrency, Client, lambda c: c.close())
