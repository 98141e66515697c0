"""Reaching a Ray cluster for ``syntra produce --ray``: the optional import, the connection, the worker sizes.

Ray is an optional extra (``pip install "syntra-dspy[ray]"``), imported only here and only when ``--ray`` is
given; without it nothing else changes. ``--concurrency`` keeps its meaning on a cluster: the LM calls in flight
across all workers (what the LM servers can take), split as evenly as it goes over the workers.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from syntra_dspy.errors import ConfigError, DependencyError
from syntra_dspy.redact import redact

logger = logging.getLogger(__name__)

INSTALL_HINT = 'pip install "syntra-dspy[ray]"'


@dataclass(frozen=True)
class RayOptions:
    """Where the Ray cluster is and how many document workers to start on it.

    ``address``: ``HOST:PORT`` of a cluster started with ``ray start --head``, ``"auto"``, or ``None`` for Ray's
    own choice (``$RAY_ADDRESS``, else a cluster running on this machine, else a new local one).
    ``workers``: document workers (Ray actors); ``None`` takes one per CPU of the cluster, at most
    ``concurrency``.
    """

    address: str | None = None
    workers: int | None = None

    def __post_init__(self) -> None:
        if self.workers is not None and (isinstance(self.workers, bool) or not isinstance(self.workers, int)
                                         or self.workers < 1):
            raise ConfigError(f"ray workers must be a positive integer, got {self.workers!r}", field="ray_workers")
        if self.address is not None and not isinstance(self.address, str):
            raise ConfigError(f"the Ray address must be a string such as 10.0.0.5:6379, got {self.address!r}",
                              field="ray")


    def describe(self) -> dict[str, Any]:
        """For the run store's session row (an address with credentials in it is masked)."""
        return {"address": redact(self.address) if self.address else None, "workers": self.workers}


def import_ray() -> ModuleType:
    """Ray, or an error that says how to install it."""
    try:
        import ray
    except ImportError:
        raise DependencyError("--ray needs Ray, which is not installed here",
                              hint=f"{INSTALL_HINT}, on this machine and on every node of the cluster") from None
    return ray


def connect(ray: ModuleType, address: str | None) -> bool:
    """Join the cluster (unless this process already has); True when this call connected, so the caller
    disconnects at the end and leaves a connection it found alone."""
    if ray.is_initialized():
        return False
    try:
        ray.init(address=address or None, log_to_driver=True, logging_level=logging.WARNING)
    except ConnectionError as exc:
        raise ConfigError(f"cannot reach the Ray cluster at {address or 'the default address'}: {exc}",
                          field="ray", hint="start one with `ray start --head` and pass the address it prints "
                                            "(HOST:PORT), or omit the address to start Ray on this machine") from None
    logger.info("connected to Ray (%s CPUs in the cluster)", ray.cluster_resources().get("CPU", 0))
    return True


def worker_shares(ray: ModuleType, options: RayOptions, concurrency: int) -> tuple[list[int], float]:
    """LM call slots for each worker (summing to ``concurrency``) and the CPUs each asks Ray for.

    A worker asks for one CPU, or an equal share when more workers than CPUs are asked for: most of a worker's
    time is spent waiting on the LM server, and a worker Ray cannot place would wait forever.
    """
    cpus = float(ray.cluster_resources().get("CPU", 1.0))
    workers = options.workers if options.workers is not None else max(1, min(int(cpus), concurrency))
    if workers > concurrency:
        raise ConfigError(f"{workers} Ray workers need --concurrency {workers} or more (one LM call each), "
                          f"got {concurrency}", field="concurrency",
                          hint=f"raise --concurrency to {workers} or more, or ask for fewer --ray-workers")
    base, extra = divmod(concurrency, workers)
    slots = [base + (i < extra) for i in range(workers)]
    return slots, min(1.0, cpus / workers)


@contextmanager
def ray_connection(options: RayOptions) -> Iterator[ModuleType]:
    """Ray, connected for the length of a run (and disconnected after, when this run connected it)."""
    ray = import_ray()
    connected = connect(ray, options.address)
    try:
        yield ray
    finally:
        if connected:
            ray.shutdown()
