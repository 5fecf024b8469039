"""Progress a person can read while a long job runs: what it is doing, how far, when it ends.

A job (a run, ``validate``, a sweep) opens a :class:`Progress` with :func:`reporting`; the code
that does the work reports to whichever is open, through the module functions, and does
nothing when none is:

- ``phase("decisions", 6)`` when a batch of work starts (a year's decisions, its reflections,
  the runs of a sweep) and ``advance()`` when one unit of it is done;
- ``llm_call(tag, seconds, cached)`` after every LLM call (``llm.wrappers.LoggedBackend``).

On a terminal one line is rewritten in place; elsewhere (a log file, a SLURM job) plain lines
are printed at the start and end of each phase and at most one every ``min_interval_s``
seconds in between.
A line reads, for example::

    demo  year 2/4  decisions 3/6  | 14 LLM calls, 9.8 s/call | about 31 calls left, ETA 5m 04s

The ETA counts the calls still to come from the job's plan (:meth:`Progress.plan`: units of
each kind still to do and the calls each is expected to take), and recalibrates both from
what this job measured: calls per unit (the measured rate, drawn towards the plan's while few
units are done), seconds per call from the calls made so far. After ``MEASURED_AFTER`` units
it says so in a line of its own.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TextIO

#: Tag prefixes of LLM calls -> the unit kind whose calls they are (RAG query expansions are
#: made for a decision).
CALL_KINDS = {"decision": "decisions", "rag_": "decisions", "reflection": "reflections",
              "institution": "institutions"}
#: Units of a kind done before its measured calls per unit replace the plan's figure.
MEASURED_AFTER = 3


def kind_of(tag: str) -> str:
    """The unit kind an LLM call with ``tag`` belongs to ("other" when none)."""
    for prefix, kind in CALL_KINDS.items():
        if tag.startswith(prefix):
            return kind
    return "other"


def duration(seconds: float) -> str:
    """A short human duration: ``45s``, ``5m 04s``, ``2h 13m``."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


@dataclass
class _Kind:
    """Plan and measurement of one kind of unit (decisions, reflections, ...)."""

    left: int = 0  # units still to do after the current phase (planned)
    calls_per_unit: float = 1.0  # the plan's figure until measured
    done: int = 0
    calls: int = 0

    def per_unit(self) -> float:
        """Calls per unit: the measured rate, drawn towards the plan's figure.

        While few units are done it counts as if ``MEASURED_AFTER`` units had gone as planned,
        so that three lucky first decisions do not halve the estimate.
        """
        return (self.calls + self.calls_per_unit * MEASURED_AFTER) / (self.done + MEASURED_AFTER)


@dataclass
class _Phase:
    kind: str
    total: int
    done: int = 0
    label: str = ""
    started: float = field(default_factory=time.perf_counter)


@dataclass
class Progress:
    """One job's progress line.

    Args:
        label: What the job is (an experiment's name, ``validate demo``).
        stream: Where lines go (default stderr).
        live: Rewrite one line in place (default: whether ``stream`` is a terminal).
        min_interval_s: Plain lines at most this often, besides the end of each phase.
        enabled: False reports nothing.
        totals: Also show the units of the phase's kind done in all of the job's plan
            (``decisions 3/8 (27/102 in all)``), for jobs whose plan is exact.
    """

    label: str
    stream: TextIO | None = None
    live: bool | None = None
    min_interval_s: float = 10.0
    enabled: bool = True
    totals: bool = False
    context: str = ""
    calls: int = 0
    call_seconds: float = 0.0  # of the calls the model answered (a cached reply costs ~0 s)
    cached: int = 0
    kinds: dict[str, _Kind] = field(default_factory=dict)
    current: _Phase | None = None
    started: float = field(default_factory=time.perf_counter)
    _steps: tuple[int, int] = (0, 0)  # outer steps finished in this process, of its steps
    _first_step: int | None = None
    _recalibrated: bool = False
    _last_line: float = float("-inf")
    _shown: int = 0  # characters of the live line on screen
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.stream = self.stream or sys.stderr
        if self.live is None:
            isatty = getattr(self.stream, "isatty", None)
            self.live = bool(isatty and isatty())

    # -- what the job tells ------------------------------------------------------------------
    def plan(self, kind: str, units: int, calls_per_unit: float = 1.0) -> None:
        """Declare the units of ``kind`` still to do after the current phase.

        ``calls_per_unit`` is the calls each is expected to take (replaced by the measured
        figure after ``MEASURED_AFTER`` units).
        """
        k = self.kinds.setdefault(kind, _Kind())
        k.left, k.calls_per_unit = max(0, int(units)), float(calls_per_unit)

    def step(self, name: str, number: int, total: int) -> None:
        """The job's outer loop is at ``number`` of ``total`` (``year 2/4``).

        Without LLM calls, the ETA comes from the time the finished steps took.
        """
        with self._lock:
            self.context = f"{name} {number}/{total}"
            if self._first_step is None:  # a resumed job: the steps before it took no time here
                self._first_step = number
            self._steps = (number - self._first_step, total - self._first_step + 1)
            self.current = None
            self._show(force=False)

    def phase(self, kind: str, total: int, label: str | None = None) -> None:
        """A batch of ``total`` units of ``kind`` starts; they come out of the plan."""
        with self._lock:
            k = self.kinds.setdefault(kind, _Kind())
            k.left = max(0, k.left - total)
            self.current = _Phase(kind, int(total), label=label or kind)
            self._show(force=True)  # a log shows each phase start: a slow first call is seen

    def advance(self, n: int = 1) -> None:
        """``n`` units of the current phase are done."""
        with self._lock:
            if self.current is None:
                return
            self.current.done += n
            kind = self.kinds.setdefault(self.current.kind, _Kind())
            kind.done += n
            if (not self._recalibrated and kind.done >= MEASURED_AFTER
                    and self.seconds_per_call() is not None):
                self._recalibrated = True
                self._say(self.recalibrated())
            self._show(force=self.current.done >= self.current.total)

    def llm_call(self, tag: str, seconds: float, cached: bool) -> None:
        """One LLM call finished (answered by the model or the response cache)."""
        with self._lock:
            self.calls += 1
            self.cached += bool(cached)
            if not cached:
                self.call_seconds += seconds
            self.kinds.setdefault(kind_of(tag), _Kind()).calls += 1
            self._show(force=False)

    # -- what it shows -----------------------------------------------------------------------
    def calls_left(self) -> float:
        """Calls still expected.

        The current phase's units left and the planned ones, each at its kind's calls per unit.
        """
        left = 0.0
        for name, k in self.kinds.items():
            units = k.left
            if self.current is not None and self.current.kind == name:
                units += max(0, self.current.total - self.current.done)
            left += units * k.per_unit()
        return left

    def recalibrated(self) -> str:
        """The estimate remade from what this job measured so far (one line)."""
        spc = self.seconds_per_call() or 0.0  # advance() calls it once a call was answered
        per = ", ".join(f"{k.per_unit():.2f} calls per {name[:-1]}"
                        for name, k in self.kinds.items() if k.done >= MEASURED_AFTER)
        left = self.calls_left()
        return (f"{self.label}: measured here {spc:.1f} s per LLM call, {per}: about "
                f"{left:.0f} more calls, about {duration(left * spc)} left")

    def seconds_per_call(self) -> float | None:
        """Mean seconds of the LLM calls the model answered (None before the first).

        Replies from the response cache are left out: a resumed job replays its cached
        calls first, and counting them would promise the calls still to make at ~0 s each.
        """
        answered = self.calls - self.cached
        return self.call_seconds / answered if answered else None

    def line(self) -> str:
        """The progress line as it reads now."""
        parts = [self.label]
        if self.context:
            parts.append(self.context)
        if self.current is not None:
            phase = self.current
            shown = f"{phase.label} {phase.done}/{phase.total}"
            kind = self.kinds.get(phase.kind)
            if self.totals and kind is not None:
                in_all = kind.done - phase.done + phase.total + kind.left
                shown += f" ({kind.done}/{in_all} in all)"
            parts.append(shown)
        text = "  ".join(parts)
        if self.calls:
            cached = f", {self.cached} cached" if self.cached else ""
            spc = self.seconds_per_call()
            rate = "" if spc is None else f", {spc:.1f} s/call"
            text += f"  | {self.calls} LLM calls{cached}{rate}"
        left = self.calls_left()
        spc = self.seconds_per_call()
        elapsed = time.perf_counter() - self.started
        done, total = self._steps
        phase = self.current
        if spc is not None and left >= 0.5:
            text += f" | about {left:.0f} calls left, ETA {duration(left * spc)}"
        elif self.calls == 0 and done and total > done:
            text += f" | ETA {duration(elapsed / done * (total - done))}"
        elif self.calls == 0 and phase is not None and 0 < phase.done < phase.total:
            per_unit = (time.perf_counter() - phase.started) / phase.done
            text += f" | ETA {duration(per_unit * (phase.total - phase.done))}"
        else:
            text += f" | {duration(elapsed)} elapsed"
        return text

    def relabel(self, label: str) -> None:
        """Rename the current phase (e.g. ``runs (2 running, 1 failed)``)."""
        with self._lock:
            if self.current is not None:
                self.current.label = label

    def _show(self, force: bool) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        assert self.stream is not None
        if self.live:
            text = self.line()
            pad = max(0, self._shown - len(text))
            self.stream.write("\r" + text + " " * pad)
            self._shown = len(text)
        elif force or now - self._last_line >= self.min_interval_s:
            self.stream.write(self.line() + "\n")
        else:
            return
        self._last_line = now
        self.stream.flush()

    def message(self, text: str) -> None:
        """Print a line of its own (after ending the live line)."""
        with self._lock:
            self._say(text)

    def _say(self, text: str) -> None:
        if not self.enabled:
            return
        self._end_live()
        assert self.stream is not None
        self.stream.write(text + "\n")
        self.stream.flush()

    def _end_live(self) -> None:
        if self.live and self._shown:
            assert self.stream is not None
            self.stream.write("\n")
            self._shown = 0

    def close(self) -> None:
        """End the live line (the cursor on a fresh line)."""
        with self._lock:
            if self.enabled:
                self._end_live()
                assert self.stream is not None
                self.stream.flush()


_current: Progress | None = None


@contextmanager
def reporting(progress: Progress) -> Iterator[Progress]:
    """Make ``progress`` the one the module functions report to while the block runs."""
    global _current
    before, _current = _current, progress
    try:
        yield progress
    finally:
        progress.close()
        _current = before


def current() -> Progress | None:
    """The progress being reported to (None: none)."""
    return _current


def phase(kind: str, total: int, label: str | None = None) -> None:
    """See :meth:`Progress.phase` (nothing without an open progress)."""
    if _current is not None:
        _current.phase(kind, total, label)


def advance(n: int = 1) -> None:
    """See :meth:`Progress.advance` (nothing without an open progress)."""
    if _current is not None:
        _current.advance(n)


def llm_call(tag: str, seconds: float, cached: bool) -> None:
    """See :meth:`Progress.llm_call` (nothing without an open progress)."""
    if _current is not None:
        _current.llm_call(tag, seconds, cached)
