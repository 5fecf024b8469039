"""Benchmarks of the LLM layer (issue 4): speed, overhead, caching and saturation.

Run: ``.venv/bin/python benchmarks/bench_llm.py [--decisions 10] [--skip-embedded]``.
Prints a table and, with ``--json PATH``, writes the figures.

1. Embedded decisions: seconds per decision and decisions per minute of the embedded model on a
   realistic PMT prompt (the system prompt of ``configs/prompts/household.yaml`` and a
   household message of memories, situation, neighbours and priced actions), JSON-schema
   constrained; cold first call and warm mean; schema validity.
2. Cached re-run: the same decisions again through the response cache (no model calls).
3. Framework overhead per call: the full stack (call log + response cache) around a backend
   that answers instantly, against the bare backend.
4. Saturation: a simulated server with a fixed per-request latency and N parallel slots,
   driven through the full stack with bounded concurrency 1..2N; throughput at concurrency N
   against N x the single-slot throughput (target >= 0.9). ``--http`` repeats it through the
   ``ollama`` client and the Ollama-API test server (tests/llm/ollama_test_server.py).

Timings depend on machine load: run on an idle machine and report the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from governed_broker.config.llm import LLMConfig  # noqa: E402
from governed_broker.llm import (  # noqa: E402
    CachedBackend,
    CallLog,
    LLMBackend,
    LLMRequest,
    LLMResponse,
    LoggedBackend,
    ResponseCache,
    build_backend,
)

DECISION_SCHEMA = {
    "type": "object",
    "properties": {
        "threat_appraisal": {"enum": ["VL", "L", "M", "H", "VH"]},
        "coping_appraisal": {"enum": ["VL", "L", "M", "H", "VH"]},
        "decision": {"enum": ["do_nothing", "buy_insurance", "elevate_house", "relocate"]},
        "reason": {"type": "string", "minLength": 10, "maxLength": 200},
    },
    "required": ["threat_appraisal", "coping_appraisal", "decision", "reason"],
    "additionalProperties": False,
}


def household_message(index: int) -> str:
    """A realistic per-household user message (about 300-400 tokens), varied by index."""
    owner = index % 3 != 1
    income = 38_000 + 9_000 * (index % 7)
    savings = 2_000 + 7_500 * (index % 5)
    floods = index % 4
    lines = [
        f"You {'own' if owner else 'rent'} your home in the {'AE' if index % 2 else 'X'} flood "
        f"zone. The chance that a flood reaches a home in this zone in any given year is about "
        f"{'1 in 100' if index % 2 else '1 in 500'}. Your household income is ${income:,} a year.",
        "",
        "What you remember:",
        f"- Year {3 + index % 4}: The water stood {0.2 + 0.15 * floods:.2f} m deep in the "
        "ground floor; we threw away carpets and the washing machine.",
        "- Year 2 (in outline): The neighbours talked about the new levee being too low.",
        "- A lesson you drew in year 5: insurance paid quickly when the Smiths were flooded.",
        "",
        f"This year (year {8 + index % 3}):",
        "- There was no flood at your home." if index % 2 else
        f"- A flood reached your home. The water was 0.{3 + index % 5} m deep at your home "
        f"and caused ${4_000 + 1_900 * index:,} of damage to the building and belongings.",
        f"- Your home has flooded {floods} times so far." if floods else
        "- Your home has not flooded in the years covered here.",
        f"- Your savings are now ${savings:,}.",
        "- You have no flood insurance in force." if index % 2 else
        "- You have flood insurance in force for this year; it lapses unless you renew it.",
        "- Your home has not been elevated.",
        "",
        f"Your neighbours: at the end of last year, {index % 6} of them had flood insurance, "
        f"{index % 3} had elevated their homes and {index % 2} had moved away.",
        "You have moderate trust in insurance companies and limited trust in your neighbours' "
        "judgement.",
        "",
        "Your choice this year. Rate your threat appraisal and coping appraisal (VL, L, M, H, "
        "VH), then choose one action:",
        "- do_nothing: costs nothing.",
        f"- buy_insurance: a premium of ${900 + 40 * index:,} this year.",
    ]
    if owner:
        lines.append(f"- elevate_house: ${48_000 + 500 * index:,} (after any subsidy).")
    lines += [
        f"- relocate: about ${25_000 + 1_000 * index:,} in moving costs.",
        "",
        'Reply as JSON: {"threat_appraisal": ..., "coping_appraisal": ..., "decision": ..., '
        '"reason": "one short sentence"}',
    ]
    return "\n".join(lines)


@functools.lru_cache(maxsize=1)
def system_prompt() -> str:
    data = yaml.safe_load((ROOT / "configs" / "prompts" / "household.yaml").read_text("utf-8"))
    return str(data["system"])


def decision_request(index: int, max_tokens: int) -> LLMRequest:
    return LLMRequest.of(
        [{"role": "system", "content": system_prompt()},
         {"role": "user", "content": household_message(index)}],
        json_schema=DECISION_SCHEMA, temperature=0.7, seed=1000 + index, max_tokens=max_tokens,
        num_ctx=2048, tag="decision",
    )


def valid(reply: LLMResponse) -> bool:
    parsed = reply.parsed
    props = DECISION_SCHEMA["properties"]
    return (
        isinstance(parsed, dict)
        and set(parsed) == set(props)
        and all(parsed[k] in props[k]["enum"] for k in props if "enum" in props[k])
        and 10 <= len(parsed["reason"]) <= 200
    )


def bench_embedded(decisions: int, max_tokens: int, work: Path) -> dict[str, Any]:
    """Sections 1 and 2: embedded model decisions, then the cached re-run."""
    inner = build_backend(LLMConfig(num_ctx=2048))
    backend = CachedBackend(inner, ResponseCache(work / "embedded_cache.sqlite"))
    start = time.perf_counter()
    backend.chat(LLMRequest.of([{"role": "user", "content": "hi"}], max_tokens=1, seed=1))
    load_s = time.perf_counter() - start  # model load (first call of the process)
    times, replies = [], []
    for index in range(decisions):
        start = time.perf_counter()
        replies.append(backend.chat(decision_request(index, max_tokens)))
        times.append(time.perf_counter() - start)
    first_total = sum(times)
    start = time.perf_counter()
    again = [backend.chat(decision_request(i, max_tokens)) for i in range(decisions)]
    cached_total = time.perf_counter() - start
    assert all(r.cached for r in again) and [r.text for r in again] == [r.text for r in replies]
    warm = times[1:] or times
    return {
        "decisions": decisions,
        "model": inner.model_id,
        "threads": inner.describe()["threads"],
        "load_s": round(load_s, 2),
        "prompt_tokens_first": replies[0].prompt_tokens,
        "completion_tokens_mean": round(statistics.mean(r.completion_tokens for r in replies), 1),
        "cold_call_s": round(times[0], 2),
        "warm_mean_s": round(statistics.mean(warm), 2),
        "warm_min_s": round(min(warm), 2),
        "warm_max_s": round(max(warm), 2),
        "s_per_decision": round(first_total / decisions, 2),
        "decisions_per_min": round(60 * decisions / first_total, 2),
        "valid_json": f"{sum(valid(r) for r in replies)}/{decisions}",
        "decisions_made": {d: sum(r.parsed.get("decision") == d for r in replies if r.parsed)
                           for d in DECISION_SCHEMA["properties"]["decision"]["enum"]},
        "cached_rerun_s": round(cached_total, 4),
        "cached_rerun_speedup": round(first_total / cached_total, 1),
    }


class InstantBackend(LLMBackend):
    """Answers at once with a fixed JSON reply: isolates the framework's own cost."""

    kind = "instant"
    model_id = "instant:bench"
    supports_schema = True
    max_concurrency = 1

    async def achat(self, request: LLMRequest) -> LLMResponse:
        text = '{"decision": "do_nothing", "reason": "benchmark reply"}'
        return LLMResponse(text=text, parsed=json.loads(text), prompt_tokens=300,
                           completion_tokens=20, backend=self.kind, model=self.model_id)


async def _sequential(backend: LLMBackend, requests: list[LLMRequest]) -> float:
    start = time.perf_counter()
    for request in requests:
        await backend.achat(request)
    return time.perf_counter() - start


def bench_overhead(calls: int, work: Path) -> dict[str, Any]:
    """Section 3: microseconds per call added by the cache and the call log."""
    requests = [decision_request(i, 128) for i in range(calls)]
    bare = asyncio.run(_sequential(InstantBackend(), requests))
    stack = LoggedBackend(
        CachedBackend(InstantBackend(), ResponseCache(work / "overhead_cache.sqlite")),
        CallLog(work / "overhead_calls.sqlite"),
    )
    miss = asyncio.run(_sequential(stack, requests))
    hit = asyncio.run(_sequential(stack, requests))
    per_call = 1e6 / calls
    return {
        "calls": calls,
        "bare_us_per_call": round(bare * per_call, 1),
        "stack_miss_us_per_call": round(miss * per_call, 1),
        "stack_hit_us_per_call": round(hit * per_call, 1),
        "overhead_miss_us_per_call": round((miss - bare) * per_call, 1),
        "overhead_hit_us_per_call": round((hit - bare) * per_call, 1),
    }


class SimulatedServerBackend(LLMBackend):
    """A server with ``slots`` parallel slots and a fixed ``latency_s`` per request."""

    kind = "simulated"
    supports_schema = True

    def __init__(self, latency_s: float, slots: int) -> None:
        self.latency_s = latency_s
        self.max_concurrency = slots
        self.model_id = f"simulated:{slots}x{latency_s:g}s"
        self._slots: asyncio.Semaphore | None = None

    async def achat(self, request: LLMRequest) -> LLMResponse:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_concurrency)
        start = time.perf_counter()
        async with self._slots:  # excess requests queue, as on a real server
            await asyncio.sleep(self.latency_s)
        text = '{"decision": "do_nothing", "reason": "simulated"}'
        return LLMResponse(text=text, parsed=json.loads(text), backend=self.kind,
                           model=self.model_id, latency_s=time.perf_counter() - start)


async def _bounded(backend: LLMBackend, requests: list[LLMRequest], concurrency: int) -> float:
    """Run requests with at most ``concurrency`` in flight (as the broker does)."""
    gate = asyncio.Semaphore(concurrency)

    async def one(request: LLMRequest) -> None:
        async with gate:
            await backend.achat(request)

    start = time.perf_counter()
    await asyncio.gather(*(one(r) for r in requests))
    return time.perf_counter() - start


def _saturation(make_backend, slots: int, per_level: int) -> dict[str, Any]:
    levels = sorted({1, max(1, slots // 2), slots, 2 * slots})
    throughput = {}
    for level in levels:
        backend = make_backend(level)
        count = per_level * max(1, min(level, slots))
        requests = [decision_request(i, 64) for i in range(count)]
        elapsed = asyncio.run(_bounded(backend, requests, level))
        throughput[level] = count / elapsed
    ratio = throughput[slots] / (slots * throughput[1])
    return {
        "slots": slots,
        "throughput_req_per_s": {str(k): round(v, 2) for k, v in throughput.items()},
        "saturation_ratio": round(ratio, 3),
    }


def bench_saturation(slots: int, latency_s: float, per_level: int, work: Path) -> dict[str, Any]:
    """Section 4: throughput vs concurrency through the full stack (cache + call log)."""
    counter = iter(range(10**6))

    def make(level: int) -> LLMBackend:
        tag = next(counter)
        return LoggedBackend(
            CachedBackend(SimulatedServerBackend(latency_s, slots),
                          ResponseCache(work / f"sat_cache_{tag}.sqlite")),
            CallLog(work / f"sat_calls_{tag}.sqlite"),
        )

    return {"latency_s": latency_s, **_saturation(make, slots, per_level)}


def bench_saturation_http(slots: int, latency_s: float, per_level: int) -> dict[str, Any]:
    """Section 4 through the official ollama client and the Ollama-API test server."""
    sys.path.insert(0, str(ROOT / "tests" / "llm"))
    from ollama_test_server import OllamaTestServer

    from governed_broker.llm.ollama_backend import OllamaBackend

    def complete(request: dict[str, Any]) -> dict[str, Any]:
        time.sleep(latency_s)
        content = '{"decision": "do_nothing", "reason": "simulated"}'
        return {"choices": [{"message": {"content": content}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 300, "completion_tokens": 12}}

    with OllamaTestServer(complete, slots=slots) as server:
        def make(level: int) -> LLMBackend:
            return OllamaBackend("qwen2.5-coder:0.5b", [server.host], concurrency=level)

        return {"latency_s": latency_s, **_saturation(make, slots, per_level)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=10, help="embedded decisions")
    parser.add_argument("--max-tokens", type=int, default=160)
    parser.add_argument("--skip-embedded", action="store_true")
    parser.add_argument("--overhead-calls", type=int, default=2000)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.2, help="simulated seconds/request")
    parser.add_argument("--per-level", type=int, default=10, help="requests per busy slot")
    parser.add_argument("--http", action="store_true", help="also saturate over HTTP")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args(argv)

    results: dict[str, Any] = {"load_average": os.getloadavg(), "cores": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="bench_llm_") as tmp:
        work = Path(tmp)
        results["overhead"] = bench_overhead(args.overhead_calls, work)
        print("overhead:", json.dumps(results["overhead"]), flush=True)
        results["saturation"] = bench_saturation(args.slots, args.latency, args.per_level, work)
        print("saturation:", json.dumps(results["saturation"]), flush=True)
        if args.http:
            results["saturation_http"] = bench_saturation_http(
                args.slots, args.latency, args.per_level)
            print("saturation (http):", json.dumps(results["saturation_http"]), flush=True)
        if not args.skip_embedded:
            results["embedded"] = bench_embedded(args.decisions, args.max_tokens, work)
            print("embedded:", json.dumps(results["embedded"]), flush=True)
    results["load_average_end"] = os.getloadavg()
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
