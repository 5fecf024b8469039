"""Scale benchmarks (issue 15).

Framework cost per household-year, checkpoints, saturation, cohort mode.

Usage: python benchmarks/bench_scale.py [--sections cost years checkpoint saturation cohort
       basin] [--http] [--json PATH]

The cost, years, checkpoint and saturation runs are complete ``run_experiment`` calls of
``experiments/baseline.yaml`` with the governed
LLM broker (strict governance), human-centric memory and reflection every year. The "LLM" is
instant (``benchmarks/instant_llm.yaml``, the scripted backend), so the time measured is the
framework's own; the response cache and the call log are on (in a temporary directory).

Sections:

* ``cost``: CPU milliseconds per household-year of whole runs at 100, 1,000 and 10,000
  households (``--cost-years``, default 5) and of the 1,000 x 20 run of the issue's target.
* ``years``: the same at 100 households and 5, 20 and 40 years, and the marginal CPU of one
  household-year in years 6-10 and 36-40 (from the 40-year run; each year's CPU is measured
  from the end of one checkpoint to the end of the next, so it includes the checkpoint), with
  the LLM calls per household-year of each window (decisions, re-asks, reflections) and the CPU
  per call: later years may ask more, which is work, not a cost of the history kept.
* ``checkpoint``: bytes written to ``checkpoints/`` and seconds of the checkpoint per year
  (1,000 households x 30 years).
* ``cohort``: cohort mode against a full run (``governed-broker cohort-check``) on 500
  households x 20 years of ``experiments/basin_cohort.yaml`` with a synthetic stochastic
  responder (``benchmarks/stochastic_llm.yaml``): speed-up and error.
* ``basin`` (not run by default: minutes): ``experiments/basin_cohort.yaml`` in full,
  10,000 households x 30 years in cohort mode on the instant script.
* ``saturation``: one year of 1,000 households against a simulated server with N slots and a
  fixed latency (an ``LLMBackend`` whose requests queue for a slot and take the latency),
  behind the response cache and the call log; achieved / ideal throughput for N = 1, 8, 64.
  The latency is N / ``--server-rate`` seconds, so the server answers ``--server-rate``
  requests per second at every N; ideal = calls / rate. ``--http`` repeats it through the
  Ollama HTTP API (``benchmarks/simulated_ollama.py`` in its own process, the ollama client).

CPU time is ``time.process_time`` of this process (all threads); on a shared machine read
ratios and CPU times, not wall times. The first and the last line give the CPU seconds of a
fixed Python loop (``reference_loop_s``): how fast the machine was while the figures were taken.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENT = ROOT / "experiments" / "baseline.yaml"
SCRIPT = Path(__file__).resolve().parent / "instant_llm.yaml"

from governed_broker import checkpoint as ckpt  # noqa: E402
from governed_broker.config import load_experiment  # noqa: E402
from governed_broker.llm.base import LLMBackend, LLMRequest, LLMResponse  # noqa: E402
from governed_broker.llm.call_log import CallLog  # noqa: E402
from governed_broker.llm.scripted import ScriptedBackend  # noqa: E402
from governed_broker.runner import run_experiment  # noqa: E402


def settings(households: int, years: int, cache: Path, extra: list[str] = ()) -> list[str]:
    """``--set`` overrides of the benchmark's governed LLM run."""
    configs = ROOT / "configs"
    llm = {"backend": "scripted", "model": "instant", "script": str(SCRIPT),
           "cache": {"mode": "readwrite", "path": str(cache)}}
    return [f"population.size={households}", f"years={years}", "outputs.plots=false",
            "outputs.progress=false", "memory.engine=humancentric",
            f"memory.concepts_file={configs / 'knowledge' / 'flood_concepts.yaml'}",
            f"memory.texts_file={configs / 'prompts' / 'memory.yaml'}",
            f"governance.context.prompts_dir={configs / 'prompts'}",
            "decision.maker=llm", f"llm={json.dumps(llm)}", "governance.profile=strict",
            "reflection.enabled=true", "reflection.interval_years=1",
            "limits.max_llm_calls=100000000", *extra]


class YearClock:
    """Records CPU time, wall time.

    Checkpoint bytes and LLM calls so far (``calls``, a counter) at the end of every checkpoint.
    """

    def __init__(self, calls: CallCounter | None = None) -> None:
        self.ends: list[tuple[float, float]] = []
        self.write_s: list[float] = []
        self.bytes: list[int] = []
        self.calls_at: list[int] = []
        self._calls = calls
        self._files: dict[str, tuple[int, int]] = {}
        self._original = ckpt.CheckpointWriter.write

    def __enter__(self) -> YearClock:
        clock, original = self, self._original

        def write(writer, model, rows):
            t0 = time.perf_counter()
            out = original(writer, model, rows)
            clock.write_s.append(time.perf_counter() - t0)
            clock.ends.append((time.process_time(), time.perf_counter()))
            clock.bytes.append(clock._written(writer.work / ckpt.CHECKPOINT_DIR))
            clock.calls_at.append(clock._calls.calls if clock._calls is not None else 0)
            return out

        ckpt.CheckpointWriter.write = write
        return self

    def __exit__(self, *exc: object) -> None:
        ckpt.CheckpointWriter.write = self._original

    def _written(self, root: Path) -> int:
        """Bytes written under ``root`` since the last call.

        New or replaced files whole, files appended to by their growth.
        """
        now = {str(p): (p.stat().st_ino, p.stat().st_size) for p in root.rglob("*")
               if p.is_file()}
        total = 0
        for path, (ino, size) in now.items():
            old = self._files.get(path)
            total += size if old is None or old[0] != ino else max(0, size - old[1])
        self._files = now
        return total


class CallCounter:
    """Counts the LLM calls of a run.

    Every call the call log records: decisions, re-asks and reflections, answered by the backend or
    the cache.
    """

    def __init__(self) -> None:
        self.calls = 0
        self._original = CallLog.record

    def __enter__(self) -> CallCounter:
        counter, original = self, self._original

        def record(log, *args, **kwargs):
            counter.calls += 1
            return original(log, *args, **kwargs)

        CallLog.record = record
        return self

    def __exit__(self, *exc: object) -> None:
        CallLog.record = self._original


class LLMClock:
    """CPU seconds spent inside the scripted backend's ``achat``, to tell it from the framework's.

    The instant "LLM" itself: matching the prompt, encoding and parsing its reply.
    """

    def __init__(self) -> None:
        self.cpu_s = 0.0
        self._original = ScriptedBackend.achat

    def __enter__(self) -> LLMClock:
        clock, original = self, self._original

        async def achat(backend, request):
            t0 = time.thread_time()
            try:
                return await original(backend, request)  # never suspends: one thread's time
            finally:
                clock.cpu_s += time.thread_time() - t0

        ScriptedBackend.achat = achat
        return self

    def __exit__(self, *exc: object) -> None:
        ScriptedBackend.achat = self._original


def timed_run(households: int, years: int, extra: list[str] = ()) -> dict[str, Any]:
    """One run; CPU and wall seconds in all and per year."""
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as tmp:
        config = load_experiment(EXPERIMENT, settings(households, years,
                                                      Path(tmp) / "cache.sqlite", extra))
        with CallCounter() as calls, YearClock(calls) as clock, LLMClock() as llm:
            c0, t0 = time.process_time(), time.perf_counter()
            run_experiment(config, Path(tmp) / "run", progress=False)
            cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    cpu_ends = [c0] + [c for c, _ in clock.ends]
    per_year = [b - a for a, b in zip(cpu_ends, cpu_ends[1:], strict=False)]
    call_ends = [0] + clock.calls_at
    year_calls = [b - a for a, b in zip(call_ends, call_ends[1:], strict=False)]
    household_years = households * years
    return {"households": households, "years": years, "cpu_s": cpu, "wall_s": wall,
            "ms_per_household_year": 1000 * cpu / household_years,
            "llm_cpu_s": llm.cpu_s,
            "framework_ms_per_household_year": 1000 * (cpu - llm.cpu_s) / household_years,
            "year_cpu_s": per_year, "year_calls": year_calls, "checkpoint_s": clock.write_s,
            "checkpoint_bytes": clock.bytes}


def _cost_line(r: dict[str, Any]) -> str:
    return (f"{r['ms_per_household_year']:.2f} ms CPU per household-year, of which the "
            f"instant LLM {1000 * r['llm_cpu_s'] / (r['households'] * r['years']):.2f} "
            f"(framework {r['framework_ms_per_household_year']:.2f}); {r['cpu_s']:.1f} s CPU, "
            f"{r['wall_s']:.1f} s wall")


def section_cost(args) -> dict[str, Any]:
    out = {}
    for n in args.cost_sizes:
        r = timed_run(n, args.cost_years)
        out[f"{n}x{args.cost_years}"] = r
        print(f"cost {n:>6} households x {args.cost_years:>2} years: {_cost_line(r)}",
              flush=True)
    r = timed_run(1000, 20)
    out["1000x20"] = r
    print(f"cost   1000 households x 20 years: {_cost_line(r)}", flush=True)
    return out


def _marginal(r: dict[str, Any], first: int, last: int) -> float:
    years = r["year_cpu_s"][first - 1:last]
    return 1000 * sum(years) / (len(years) * r["households"])


def _calls_per_household_year(r: dict[str, Any], first: int, last: int) -> float:
    calls = r["year_calls"][first - 1:last]
    return sum(calls) / (len(calls) * r["households"])


def section_years(args) -> dict[str, Any]:
    out = {}
    for years in (5, 20, 40):
        r = timed_run(args.years_households, years)
        out[str(years)] = r
        print(f"years {args.years_households} households x {years:>2} years: "
              f"{_cost_line(r)}", flush=True)
    r = out["40"]
    early, late = _marginal(r, 6, 10), _marginal(r, 36, 40)
    # later years may simply ask more (re-asks follow the world's state): the cost per call
    # tells that from a cost that grows with the history kept
    calls_early = _calls_per_household_year(r, 6, 10)
    calls_late = _calls_per_household_year(r, 36, 40)
    per_call = (late / calls_late) / (early / calls_early)
    out["marginal_ms"] = {"6-10": early, "36-40": late, "ratio": late / early,
                          "calls_per_household_year": {"6-10": calls_early,
                                                       "36-40": calls_late},
                          "ratio_per_call": per_call}
    print(f"years marginal ms CPU per household-year: years 6-10 {early:.2f}, years 36-40 "
          f"{late:.2f} (ratio {late / early:.2f}); LLM calls per household-year "
          f"{calls_early:.2f} and {calls_late:.2f}; ms per call {early / calls_early:.3f} and "
          f"{late / calls_late:.3f} (ratio {per_call:.2f})", flush=True)
    return out


def section_checkpoint(args) -> dict[str, Any]:
    r = timed_run(args.checkpoint_households, args.checkpoint_years)
    block = max(1, args.checkpoint_years // 6)
    print(f"checkpoint {args.checkpoint_households} households x {args.checkpoint_years} "
          "years\n  years     KB written per year   ms per checkpoint", flush=True)
    rows = []
    for start in range(0, args.checkpoint_years, block):
        b = r["checkpoint_bytes"][start:start + block]
        s = r["checkpoint_s"][start:start + block]
        rows.append({"years": [start + 1, start + len(b)], "kb": sum(b) / len(b) / 1024,
                     "ms": 1000 * sum(s) / len(s)})
        print(f"  {start + 1:>3}-{start + len(b):<3}   {rows[-1]['kb']:>14.1f}   "
              f"{rows[-1]['ms']:>14.1f}", flush=True)
    return {"rows": rows, "run": r}


class SimulatedServer(LLMBackend):
    """A server with ``slots`` parallel slots and a fixed ``latency_s`` per request.

    Requests are served first come, first served: one that arrives when every slot is taken
    waits for the earliest to free, as in a real server's queue. Slots are kept on the server's
    own clock (when each frees), so a slot is free again after the latency whatever the client
    is doing; a reply is ready at the end of its slot time. Replies come from the instant
    script (``inner``), so a run behaves as the cost runs do.
    """

    kind = "simulated"
    supports_schema = True

    def __init__(self, inner: LLMBackend, slots: int, latency_s: float) -> None:
        self.inner = inner
        self.max_concurrency = slots
        self.latency_s = latency_s
        self.model_id = f"simulated:{slots}x{latency_s:g}s/{inner.model_id}"
        self.calls = 0
        self._free_at = [0.0] * slots  # heap: when each slot is free (loop clock, seconds)

    async def achat(self, request: LLMRequest) -> LLMResponse:
        now = asyncio.get_running_loop().time()
        start = max(now, heapq.heappop(self._free_at))
        heapq.heappush(self._free_at, start + self.latency_s)
        await asyncio.sleep(start + self.latency_s - now)
        self.calls += 1
        return await self.inner.achat(request)


class _StepStart:
    """Records when the (last) year began (``FloodModel.step``)."""

    def __enter__(self) -> _StepStart:
        from governed_broker.sim.model import FloodModel

        self._original, clock = FloodModel.step, self

        def step(model):
            clock.started = time.perf_counter()
            return clock._original(model)

        FloodModel.step = step
        return self

    def __exit__(self, *exc: object) -> None:
        from governed_broker.sim.model import FloodModel

        FloodModel.step = self._original


def section_saturation(args) -> dict[str, Any]:
    from governed_broker.broker.factory import CALL_LOG_FILE, build_decision_maker
    from governed_broker.config.resolved import resolve_experiment
    from governed_broker.llm.cache import ResponseCache
    from governed_broker.llm.call_log import CallLog
    from governed_broker.llm.factory import build_scripted
    from governed_broker.llm.wrappers import CachedBackend, LoggedBackend

    out = {}
    print(f"saturation: 1 year of {args.saturation_households} households, server answering "
          f"{args.server_rate:g} requests/s", flush=True)
    for slots in args.slots:
        latency = slots / args.server_rate
        with tempfile.TemporaryDirectory(prefix="bench_sat_") as tmp:
            work = Path(tmp)
            config = load_experiment(EXPERIMENT, settings(
                args.saturation_households, 1, work / "cache.sqlite"))
            experiment = resolve_experiment(config)
            server = SimulatedServer(build_scripted(config.llm, config.base_dir), slots, latency)
            run_dir = work / "audit"  # the broker's files: outside the run (the maker is ours)
            run_dir.mkdir()
            backend = LoggedBackend(
                CachedBackend(server, ResponseCache(work / "cache.sqlite")),
                CallLog(run_dir / CALL_LOG_FILE))
            maker = build_decision_maker(experiment, run_dir, backend=backend)
            with YearClock() as clock, _StepStart() as step:
                run_experiment(config, work / "run", progress=False, decision_maker=maker)
            year_s = clock.ends[-1][1] - step.started  # the year, its checkpoint included
        ideal_s = server.calls * latency / slots
        ratio = ideal_s / year_s
        out[str(slots)] = {"slots": slots, "latency_s": latency, "calls": server.calls,
                           "year_wall_s": year_s, "ideal_s": ideal_s, "ratio": ratio}
        print(f"  N = {slots:>3} slots, latency {latency:.3f} s: {server.calls} calls in "
              f"{year_s:.1f} s (ideal {ideal_s:.1f} s): achieved/ideal {ratio:.3f}", flush=True)
    if args.http:
        out["http"] = {str(n): _saturation_http(args, n) for n in args.slots}
    return out


def _saturation_http(args, slots: int) -> dict[str, Any]:
    """One year against benchmarks/simulated_ollama.py (its own process) through the ollama client.

    The Ollama HTTP API, ``llm.concurrency`` = ``--http-queue`` x the server's slots (above 1,
    requests also wait in the server's queue).
    """
    latency = slots / args.server_rate
    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("simulated_ollama.py")), "--slots",
         str(slots), "--latency", str(latency)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True)
    try:
        host = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory(prefix="bench_sat_http_") as tmp:
            llm = {"backend": "ollama", "hosts": [host], "model": "instant",
                   "concurrency": args.http_queue * slots, "cache": {"mode": "readwrite",
                                                   "path": str(Path(tmp) / "cache.sqlite")}}
            config = load_experiment(EXPERIMENT, settings(
                args.saturation_households, 1, Path(tmp) / "cache.sqlite",
                [f"llm={json.dumps(llm)}"]))
            with YearClock() as clock, _StepStart() as step:
                run_experiment(config, Path(tmp) / "run", progress=False)
            year_s = clock.ends[-1][1] - step.started
            with sqlite3.connect(Path(tmp) / "run" / "llm_calls.sqlite") as conn:
                calls = conn.execute("SELECT count(*) FROM calls").fetchone()[0]
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    ideal_s = calls * latency / slots
    print(f"  HTTP N = {slots:>3} slots, latency {latency:.3f} s: {calls} calls in {year_s:.1f} "
          f"s (ideal {ideal_s:.1f} s): achieved/ideal {ideal_s / year_s:.3f}", flush=True)
    return {"slots": slots, "latency_s": latency, "calls": calls, "year_wall_s": year_s,
            "ideal_s": ideal_s, "ratio": ideal_s / year_s}


BASIN = ROOT / "experiments" / "basin_cohort.yaml"
STOCHASTIC = Path(__file__).resolve().parent / "stochastic_llm.yaml"


def _scripted(script: Path, name: str) -> str:
    return "llm=" + json.dumps({"backend": "scripted", "model": name, "script": str(script),
                                "cache": {"mode": "off"}})


def section_cohort(args) -> dict[str, Any]:
    """Cohort mode against a full run (synthetic stochastic responder).

    On ``--cohort-households`` of experiments/basin_cohort.yaml for ``--cohort-years``, with
    benchmarks/stochastic_llm.yaml: speed-up and the differences cohort-check reports.
    """
    from governed_broker.analysis.cohort import cohort_check, write_report

    with tempfile.TemporaryDirectory(prefix="bench_cohort_") as tmp:
        check = cohort_check(BASIN, Path(tmp), args.cohort_households,
                             [f"years={args.cohort_years}", _scripted(STOCHASTIC, "stochastic")])
        report = (write_report(check, Path(tmp))).read_text()
    full, cohort = check.runs["full"], check.runs["cohort"]
    out = {"report": check.to_dict(), "markdown": report,
           "speedup_cpu": full["cpu_s"] / cohort["cpu_s"],
           "speedup_calls": full["llm_calls"] / cohort["llm_calls"]}
    print(f"cohort {args.cohort_households} households x {args.cohort_years} years: LLM calls "
          f"{full['llm_calls']} -> {cohort['llm_calls']} ({out['speedup_calls']:.2f}x fewer), "
          f"CPU {full['cpu_s']:.1f} -> {cohort['cpu_s']:.1f} s ({out['speedup_cpu']:.2f}x); "
          f"largest action-share gap {check.max_action_gap_pp:.1f} pp, label distance threat "
          f"{check.label_distance('threat_label'):.3f} coping "
          f"{check.label_distance('coping_label'):.3f}, fit score "
          f"{check.scores['full']} -> {check.scores['cohort']}", flush=True)
    print(report, flush=True)
    return out


def section_basin(args) -> dict[str, Any]:
    """experiments/basin_cohort.yaml in full (10,000 x 30, cohort mode) on the instant script.

    Seconds, peak memory and the cohort statistics.
    """
    import resource

    with tempfile.TemporaryDirectory(prefix="bench_basin_") as tmp:
        config = load_experiment(BASIN, [f"years={args.basin_years}",
                                         f"population.size={args.basin_households}",
                                         _scripted(SCRIPT, "instant")])
        c0, t0 = time.process_time(), time.perf_counter()
        run_experiment(config, Path(tmp) / "run", progress=False)
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        manifest = json.loads((Path(tmp) / "run" / "manifest.json").read_text())
        cohorts = (Path(tmp) / "run" / "cohorts.jsonl").stat().st_size
    out = {"households": args.basin_households, "years": args.basin_years, "cpu_s": cpu,
           "wall_s": wall, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
           / 1024, "llm_calls": manifest["llm"]["stats"]["calls"]["calls"],
           "cohort": manifest["llm"]["cohort"], "cohorts_jsonl_mb": cohorts / 2**20}
    print(f"basin {args.basin_households} x {args.basin_years} in cohort mode: {wall:.0f} s wall, "
          f"{cpu:.0f} s CPU, peak {out['peak_rss_mb']:.0f} MB, {out['llm_calls']} LLM calls; "
          f"cohorts {json.dumps(out['cohort'])}", flush=True)
    return out


SECTIONS = {"cost": section_cost, "years": section_years, "checkpoint": section_checkpoint,
            "saturation": section_saturation, "cohort": section_cohort, "basin": section_basin}


def reference_loop_s() -> float:
    """CPU seconds of a fixed pure-Python loop (10 million additions in a function).

    The machine's speed when the figures were taken, printed before and after them. A shared
    machine's speed changes between days and even hours; compare figures taken at similar reference
    times, or paired runs of two checkouts.
    """
    t0, total = time.process_time(), 0
    for i in range(10_000_000):
        total += i
    return time.process_time() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", nargs="+", choices=list(SECTIONS),
                        default=["cost", "years", "checkpoint", "saturation", "cohort"])
    parser.add_argument("--cost-sizes", type=int, nargs="*", default=[100, 1000, 10000],
                        help="population sizes at --cost-years (the 1,000 x 20 run always)")
    parser.add_argument("--cost-years", type=int, default=5)
    parser.add_argument("--years-households", type=int, default=100)
    parser.add_argument("--checkpoint-households", type=int, default=1000)
    parser.add_argument("--checkpoint-years", type=int, default=30)
    parser.add_argument("--saturation-households", type=int, default=1000)
    parser.add_argument("--slots", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--server-rate", type=float, default=100.0,
                        help="requests per second the simulated server answers")
    parser.add_argument("--http", action="store_true",
                        help="saturation also through HTTP (benchmarks/simulated_ollama.py)")
    parser.add_argument("--http-queue", type=int, default=1,
                        help="llm.concurrency as a multiple of the server's slots")
    parser.add_argument("--cohort-households", type=int, default=500)
    parser.add_argument("--cohort-years", type=int, default=20)
    parser.add_argument("--basin-households", type=int, default=10_000)
    parser.add_argument("--basin-years", type=int, default=30)
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    args = parser.parse_args(argv)
    import governed_broker

    speed = reference_loop_s()
    results: dict[str, Any] = {"package": governed_broker.__file__,
                               "load_average": os.getloadavg(), "reference_loop_s": speed}
    print(f"package {governed_broker.__file__}, load average {os.getloadavg()}, reference "
          f"loop {speed:.2f} s CPU", flush=True)
    for name in args.sections:
        results[name] = SECTIONS[name](args)
    results["load_average_end"] = os.getloadavg()
    results["reference_loop_end_s"] = reference_loop_s()
    print(f"reference loop at the end {results['reference_loop_end_s']:.2f} s CPU", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
