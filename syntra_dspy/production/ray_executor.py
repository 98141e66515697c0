"""``produce --ray``: documents spread over Ray actors, results committed by the driver alone.

Each worker (:class:`~syntra_dspy.production.ray_worker.DocumentWorker`, a threaded actor) holds its share of the
LM call slots and a queue of three documents per slot, so no worker idles between two documents. The driver
waits on the results, commits each in one transaction through the :class:`RunLedger` (exactly as the thread
pool's results are) and tops the queues up. A worker killed mid-run is restarted by Ray and its documents are
run again there (nothing of theirs was committed); once Ray gives up on a worker, its documents stay to do for a
rerun. A killed driver takes its workers with it; the committed documents are kept and the same command resumes.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from syntra_dspy.errors import RunAbandoned, SyntraError, is_fatal_backend_error, stops_run
from syntra_dspy.lm.roles import embedded_name
from syntra_dspy.production.config import ProduceConfig
from syntra_dspy.production.ledger import ProductionAborted, RunLedger, resume_hint
from syntra_dspy.production.pipeline import describe_error
from syntra_dspy.production.ray_cluster import RayOptions, worker_shares
from syntra_dspy.production.ray_worker import DocumentWorker, WorkerPlan
from syntra_dspy.production.store import RunStore
from syntra_dspy.production.units import WorkUnit
from syntra_dspy.judging.judge import RelevanceJudge

logger = logging.getLogger(__name__)

#: Times Ray restarts a killed worker (and reruns its documents) before they are left for a rerun.
MAX_RESTARTS = 3
#: Seconds the workers may take to be placed and to load the artifact, corpus, encoder and index.
READY_TIMEOUT = 600.0
#: Calls that must answer while every document thread is busy (where a worker runs, its judge's state).
_CONTROL = "control"


class WorkerPool:
    """The run's Ray actors and the documents queued on each."""

    def __init__(self, ray: ModuleType, plan: WorkerPlan, options: RayOptions, concurrency: int) -> None:
        self.ray = ray
        slots, cpus = worker_shares(ray, options, concurrency)
        tag = uuid.uuid4().hex[:8]  # names let an operator (or a test) find a run's workers: syntra-produce-<tag>-<n>
        actor = ray.remote(concurrency_groups={_CONTROL: 1})(DocumentWorker)
        # Documents running at once per slot: one for the embedded engine, whose calls share one context, two for
        # a served model (as in the driver's own thread pool: runner.documents_in_flight).
        per_slot = 1 if embedded_name(plan.generator.model) is not None else 2
        self.actors = [
            actor.options(name=f"syntra-produce-{tag}-{n}", num_cpus=cpus, max_concurrency=per_slot * share + 1,
                          max_restarts=MAX_RESTARTS,
                          max_task_retries=MAX_RESTARTS).remote(plan.model_dump(mode="json"), share)
            for n, share in enumerate(slots)]
        self.depth = [3 * share for share in slots]
        self.queued = [0] * len(slots)
        self.alive = set(range(len(slots)))
        logger.info("started %d Ray workers (%s LM call slots, %.2g CPUs each)", len(slots),
                    "+".join(map(str, slots)), cpus)

    def wait_ready(self) -> list[dict[str, Any]]:
        """Block until every worker has loaded the pipeline; a worker that cannot raises its own error here."""
        try:
            return self.ray.get([self._control(a).remote() for a in self.actors], timeout=READY_TIMEOUT)
        except self.ray.exceptions.GetTimeoutError:
            free = self.ray.available_resources().get("CPU", 0)
            raise ProductionAborted(f"{len(self.actors)} Ray workers were not all ready after {READY_TIMEOUT:.0f} s "
                                    f"({free:g} CPUs free in the cluster)",
                                    hint="ask for fewer --ray-workers, or free the cluster; nothing was done, "
                                         "rerun the same command") from None
        except self.ray.exceptions.RayError as exc:
            raise _worker_failure(exc) from None

    def pick(self) -> int | None:
        """The least loaded live worker with room in its queue; None when every queue is full."""
        room = [n for n in self.alive if self.queued[n] < self.depth[n]]
        return min(room, key=lambda n: self.queued[n] / self.depth[n]) if room else None

    def submit(self, n: int, unit: WorkUnit) -> Any:
        """Queue ``unit`` on worker ``n``; returns the reference its result arrives on."""
        self.queued[n] += 1
        return self.actors[n].run.remote(*unit)

    def finished(self, n: int) -> None:
        self.queued[n] -= 1

    def judge_fallback(self) -> str | None:
        """Why a worker's graded judge fell back to the written digit, if one did."""
        for actor in (self.actors[n] for n in self.alive):
            try:
                reason = self.ray.get(self._control(actor).remote(), timeout=30)["judge_fallback"]
            except self.ray.exceptions.RayError:
                continue
            if reason:
                return reason
        return None

    def stop(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor, no_restart=True)

    @staticmethod
    def _control(actor: Any) -> Any:
        return actor.info.options(concurrency_group=_CONTROL)


def _worker_failure(exc: BaseException) -> BaseException:
    """The error a worker raised (our own errors keep their message and hint), else a plain one."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, SyntraError):
        return cause
    first = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return SyntraError(f"a Ray worker could not start: {first[:500]}",
                       hint="see the worker's log above; every node needs syntra-dspy, the artifact, the corpus "
                            "and the generator's key variable")


def execute_on_ray(ray: ModuleType, run: RunStore, session: int, plan: WorkerPlan, todo: list[WorkUnit],
                   judge: RelevanceJudge, config: ProduceConfig) -> tuple[str, int, float]:
    """Run ``todo`` on Ray workers (``config.ray``), committing each result on arrival; the same contract as the
    thread pool."""
    retry_failed = config.retry_failed
    ledger = RunLedger(run, session, total=len(todo), max_errors=config.max_errors, progress=config.progress)
    pool: WorkerPool | None = None
    try:
        with ledger:
            pool = WorkerPool(ray, plan, config.ray or RayOptions(), config.concurrency)
            where = pool.wait_ready()
            logger.info("Ray workers ready on %s after %.1f s", ", ".join(sorted({w["host"] for w in where})),
                        ledger.seconds)
            ledger.start_clock()
            status, fatal = _drive(ray, pool, ledger, iter(todo))
            if (reason := pool.judge_fallback()) and not judge.fallback:
                judge.fallback = reason
    finally:
        if pool is not None:
            pool.stop()
    if not pool.alive:
        ledger.end_quietly("error")
        raise ProductionAborted("every Ray worker died and Ray gave up restarting them", path=run.path,
                                hint="see the workers' errors above (memory?); " + resume_hint(run, retry_failed))
    ledger.conclude(status, fatal, retry_failed=retry_failed)
    return status, ledger.processed, ledger.seconds


def _drive(ray: ModuleType, pool: WorkerPool, ledger: RunLedger,
           pending: Iterator[WorkUnit]) -> tuple[str, BaseException | None]:
    """Keep the workers' queues full and commit results as they arrive; returns (status, fatal error)."""
    inflight: dict[Any, tuple[int, str]] = {}
    status, stopping = "completed", False
    fatal: BaseException | None = None

    def fill() -> None:
        while not stopping and (n := pool.pick()) is not None:
            unit = next(pending, None)
            if unit is None:
                return
            inflight[pool.submit(n, unit)] = (n, unit[0])

    fill()
    while inflight:
        try:
            done, _ = ray.wait(list(inflight), num_returns=1, timeout=1.0)
            for ref in done:
                n, doc_id = inflight.pop(ref)
                pool.finished(n)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    cause = getattr(exc, "cause", exc)
                    if not stops_run(cause):
                        raise cause from None
                    if is_fatal_backend_error(cause):
                        fatal = fatal or cause  # every further call would fail alike: stop, record nothing
                    continue
                except ray.exceptions.RayError as exc:  # the worker died and Ray gave up restarting it
                    pool.alive.discard(n)
                    logger.warning("document %s stays to do: its Ray worker is gone (%s)", doc_id,
                                   describe_error(exc)[:300])
                    continue
                ledger.commit(result)
            if fatal is not None:
                return "aborted", fatal  # the documents in flight stay pending; a rerun does them
            if ledger.backend_down and not stopping:
                stopping, status = True, "aborted"
            if not pool.alive:
                return status, fatal
            fill()
        except KeyboardInterrupt:
            if stopping and status == "interrupted":
                raise RunAbandoned from None  # the workers are killed on the way out; nothing more is committed
            stopping, status = True, "interrupted"
            logger.warning("interrupted: committing %d documents in flight (Ctrl-C again to abandon them; a "
                           "second SIGTERM does too)",
                           len(inflight))
    return status, fatal

