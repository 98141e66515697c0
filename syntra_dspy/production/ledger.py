"""The driver's side of a production session: commit finished documents, count, report, decide when to stop.

Whatever runs the documents (a thread pool here, Ray actors on a cluster), only the driver writes the run store,
one transaction per document, in completion order. The ledger owns what every executor must do alike with a
finished document: commit it, show it on the progress bar and the log, and count backend failures in a row so
the run stops when the backend is down. ``conclude`` ends the session and says, truthfully, what a rerun does.
"""

from __future__ import annotations

import logging
import sqlite3
import sys
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import Self

from syntra_dspy.errors import SyntraError
from syntra_dspy.estimate import duration
from syntra_dspy.production.pipeline import describe_error
from syntra_dspy.production.store import RunStore
from syntra_dspy.production.store_file import storage_error
from syntra_dspy.production.units import BackendState, DocumentResult

logger = logging.getLogger(__name__)

#: Seconds between two progress lines on the log (the bar, when shown, updates on every document).
LOG_EVERY = 10.0
#: The pace and the time left are read off the last this many documents once that many have finished: the session's
#: average counts the start (models, index) and any pause (a run stopped with SIGSTOP for an hour read "20 h left"
#: when 5 remained).
PACE_WINDOW = 10


class ProductionAborted(SyntraError):
    """The backend kept failing; finished documents are kept and the same command resumes."""


class Progress:
    """A tqdm bar over documents (queries, records, failures, tokens/s) and a progress line on the log every
    ``log_every`` seconds with documents/s, calls/s, tokens/s and failures, so a run without a terminal (a
    cluster job, ``--no-progress``) still shows its pace."""

    def __init__(self, total: int, enabled: bool, *, log_every: float = LOG_EVERY) -> None:
        from tqdm.auto import tqdm

        self.bar = tqdm(total=total, unit="doc", desc="produce", disable=not enabled, file=sys.stderr,
                        dynamic_ncols=True)
        self.total = total
        self.counts: Counter[str] = Counter()
        self.started = time.perf_counter()
        self.log_every = log_every
        self._logged = self.started
        self._finished: deque[float] = deque(maxlen=PACE_WINDOW + 1)  # when the latest documents finished

    def update(self, result: DocumentResult) -> None:
        c = self.counts
        c["documents"] += 1
        c["queries"] += len(result.queries)
        c["records"] += result.records
        c["failures"] += len(result.failures)
        c["tokens"] += result.tokens
        c["calls"] += result.calls
        rate = c["tokens"] / max(time.perf_counter() - self.started, 1e-9)
        self.bar.set_postfix(q=c["queries"], rec=c["records"], fail=c["failures"], tok_s=f"{rate:.0f}", refresh=False)
        self.bar.update(1)
        now = time.perf_counter()
        self._finished.append(now)
        if now - self._logged >= self.log_every or c["documents"] == self.total:
            self._logged = now
            logger.info("%s", self.line())

    def restart(self) -> None:
        """Rates from now (nothing counted yet)."""
        self.started = self._logged = time.perf_counter()
        self._finished.clear()
        self.bar.reset(total=self.total)

    def line(self) -> str:
        """One line on the pace (over the last :data:`PACE_WINDOW` documents, or all so far while fewer have
        finished) and the time left at that pace (for the log)."""
        c, seconds = self.counts, max(time.perf_counter() - self.started, 1e-9)
        done = c["documents"]
        per_doc = seconds / done if done else 0.0
        if len(self._finished) > PACE_WINDOW:
            per_doc = max(self._finished[-1] - self._finished[0], 1e-9) / PACE_WINDOW
        if not done:
            pace = "none finished yet"
        else:
            pace = f"{1 / per_doc:.2f}/s" if per_doc <= 1 else f"{per_doc:.0f} s/doc"
        if 0 < done < self.total:
            pace += f", about {duration((self.total - done) * per_doc)} left"
        return (f"progress: {done}/{self.total} documents ({pace}), "
                f"{c['calls'] / seconds:.1f} calls/s, {c['tokens'] / seconds:.0f} tokens/s, "
                f"{c['records']} records, {c['failures']} failures")

    def close(self) -> None:
        self.bar.close()


class RunLedger:
    """Commits each finished document once and keeps the counts that decide whether the session goes on."""

    def __init__(self, run: RunStore, session: int, *, total: int, max_errors: int, progress: bool,
                 backend: Callable[[], BackendState | None] | None = None) -> None:
        self.run, self.session = run, session
        self.backend = backend  # how the generator is reached so far (schema form, endpoints), when known here
        self.total, self.max_errors = total, max_errors
        self.progress = Progress(total, progress)
        self.processed = 0
        self.consecutive = 0  # documents in a row that failed on the backend (not on an invalid answer)
        self.last_error: str | None = None
        self.started = time.perf_counter()

    def commit(self, result: DocumentResult) -> None:
        """Write ``result`` in one transaction (a Ctrl-C here rolls it back; the caller may retry it)."""
        try:
            self.run.commit(result, self.session, self.backend() if self.backend else None)
        except sqlite3.OperationalError as exc:  # e.g. a full disk: rolled back, store intact
            raise storage_error(exc, self.run.path) from None
        self.processed += 1
        self.progress.update(result)
        if result.status == "failed" and result.error_kind != "output":
            self.consecutive, self.last_error = self.consecutive + 1, result.error
        elif result.status != "failed":
            self.consecutive = 0

    def start_clock(self) -> None:
        """Count rates from now: a Ray run first waits for its workers to load, which is not document time."""
        self.started = time.perf_counter()
        self.progress.restart()

    @property
    def backend_down(self) -> bool:
        """Enough documents in a row failed on the backend that the rest would too."""
        return self.consecutive >= min(self.max_errors, self.total)

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.started

    def close(self) -> None:
        self.progress.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        """Leaving on an error marks the session ended by it (``interrupted`` for Ctrl-C); the bar is closed."""
        try:
            if exc_type is not None:
                self.end_quietly("interrupted" if issubclass(exc_type, KeyboardInterrupt) else "error")
        finally:
            self.close()

    def end_quietly(self, status: str) -> None:
        """Mark the session's end on the way out of an error; a store that cannot be written (a full disk) must
        not hide the error that stopped the run."""
        try:
            self.run.end_session(self.session, status)
        except sqlite3.Error as exc:
            logger.warning("could not mark session %d %s in the run store: %s", self.session, status, exc)

    def conclude(self, status: str, fatal: BaseException | None, *, retry_failed: bool) -> None:
        """End the session as ``status``; raise what stopped it (Ctrl-C, a refused or a failing backend)."""
        state = self.backend() if self.backend else None
        if state is not None:
            self.run.record_backend(self.session, state)
        self.run.end_session(self.session, status)
        if status == "interrupted":
            raise KeyboardInterrupt
        if fatal is not None:
            status_code = getattr(fatal, "status", None)
            cause = describe_error(fatal) + (f" (HTTP {status_code})" if status_code else "")
            raise ProductionAborted(f"the LM backend refused the run: {cause}; stopped at once, since every "
                                    "further call would fail the same way", path=self.run.path,
                                    hint="fix the key (--api-key-env), the server address or the model name; "
                                         + resume_hint(self.run, retry_failed))
        if status == "aborted":
            raise ProductionAborted(
                f"{self.consecutive} documents in a row failed on the LM backend or its configuration "
                f"(last: {self.last_error}); stopped",
                path=self.run.path, hint="check the server; " + resume_hint(self.run, retry_failed))


def resume_hint(run: RunStore, retry_failed: bool) -> str:
    """What rerunning the same command would really do (a hint that promises a resume must deliver one)."""
    todo = len(run.todo(retry_failed=retry_failed))
    if todo:
        return f"finished documents are kept; rerun the same command to resume ({todo} documents to do)"
    counts = run.document_counts()
    redo = counts["failed"] + counts["partial"]
    return (f"finished documents are kept; the same command would find nothing to do, since the {redo} failed "
            "documents failed for a reason a plain rerun does not retry: fix the cause, then rerun with "
            "--retry-failed")
