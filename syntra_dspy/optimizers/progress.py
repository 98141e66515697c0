"""The compile's progress: a bar over the attempts with the time left, and a line on the log.

A compile is stages x attempts x trials: each stage's loop runs up to ``max_attempts`` attempts, each a trial over
the sampled documents (or the calibration candidates) and a review; a loop stops at the first attempt that passes.
The time left is the pace of the attempts so far times the attempts that may still run, so it is an upper bound
that falls as loops pass early. The bar (on a terminal) moves after every attempt and shows the LM calls as they
go; the line goes to the log after every attempt and, while an attempt runs, every ``log_every`` seconds, so a
compile of tens of minutes on the embedded model never sits silent, with or without a terminal.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Self

from syntra_dspy.estimate import duration

logger = logging.getLogger(__name__)

#: Seconds between two progress lines on the log while an attempt runs.
LOG_EVERY = 60.0
#: Seconds between two refreshes of the bar's call count while an attempt runs.
REFRESH_EVERY = 5.0


class CompileProgress:
    """Counts stages and attempts; ``line()`` says where the compile is and the time left at its pace, and goes to
    the log after every attempt. Used as a context manager with ``live``, it also shows the bar (on a terminal)
    and keeps the log and the bar's call count fresh while an attempt runs."""

    def __init__(self, stages: Sequence[str], attempts: int, *, meter: Any = None, live: bool = True,
                 log_every: float = LOG_EVERY, clock: Callable[[], float] = time.perf_counter) -> None:
        self.stages, self.attempts, self.meter = list(stages), max(attempts, 1), meter
        self.live, self.log_every, self.clock = live, log_every, clock
        self.started = clock()
        self.stage = -1  # index of the stage running
        self.attempt = 0  # attempts finished in the running stage
        self.done = 0  # attempts finished over the whole compile
        self.skipped = 0  # attempts the loops that passed early did not need
        self._bar: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what the strategy reports -------------------------------------------------------------------
    def stage_started(self, name: str) -> None:
        self.stage = self.stages.index(name)
        self.attempt = 0
        self._show()

    def attempt_done(self, attempt: Any = None) -> None:
        """An attempt of the running stage's loop finished (``RefinementLoop``'s ``on_attempt``)."""
        self.attempt += 1
        self.done += 1
        if self._bar is not None:
            self._bar.update(1)
        self._show()
        logger.info("%s", self.line())

    def stage_done(self, attempts_run: int) -> None:
        """The stage ended after ``attempts_run`` attempts; a stage without a loop (drafted only, or GEPA's own
        search) counts as one. The attempts its loop did not need leave the total."""
        ran = max(attempts_run, 1)
        if ran > self.attempt:
            if self._bar is not None:
                self._bar.update(ran - self.attempt)
            self.done += ran - self.attempt
            self.attempt = ran
        self.skipped += max(self.attempts - self.attempt, 0)
        self._show()

    # -- what it says ----------------------------------------------------------------------------------
    @property
    def total(self) -> int:
        """Attempts the whole compile may take, at most (the stages' limits less those not needed)."""
        return len(self.stages) * self.attempts - self.skipped

    def calls(self) -> int:
        if self.meter is None:
            return 0
        return sum(u.get("calls", 0) for u in self.meter.snapshot().values())

    def where(self) -> str:
        if not 0 <= self.stage < len(self.stages):
            return "starting"
        return (f"stage {self.stage + 1}/{len(self.stages)} {self.stages[self.stage]}, attempt "
                f"{min(self.attempt + 1, self.attempts)}/{self.attempts}")

    def line(self) -> str:
        elapsed = self.clock() - self.started
        left = self.total - self.done
        if left <= 0:
            pace = "no attempt left"
        elif self.done:
            per_attempt = elapsed / self.done
            pace = f"{duration(per_attempt)} an attempt, at most about {duration(left * per_attempt)} left"
        else:
            pace = "no attempt finished yet"
        return (f"compile: {self.where()}; {self.done} of at most {self.total} attempts done in {duration(elapsed)} "
                f"({pace}); {self.calls()} LM calls so far")

    def _show(self) -> None:
        if self._bar is not None:
            self._bar.total = self.total
            self._bar.set_postfix_str(f"{self.where()}, {self.calls()} LM calls")

    # -- the bar, and the heartbeat while an attempt runs ---------------------------------------------------------
    def __enter__(self) -> Self:
        if not self.live:
            return self
        from tqdm.auto import tqdm

        # disable=None: no bar where stderr is not a terminal (a log file, a pipe), where the lines say the same
        self._bar = tqdm(total=self.total, unit="attempt", desc="compile", file=sys.stderr, dynamic_ncols=True,
                         disable=None)
        self._stop.clear()
        self._thread = threading.Thread(target=self._beat, name="syntra-compile-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._bar is not None:
            self._bar.close()

    def _beat(self) -> None:
        logged = self.clock()
        while not self._stop.wait(REFRESH_EVERY):
            self._show()
            if self.clock() - logged >= self.log_every:
                logged = self.clock()
                logger.info("%s", self.line())
