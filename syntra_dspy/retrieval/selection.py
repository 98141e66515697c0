"""Diversity-aware document selection (the paper's Algorithm 1), seeded and deterministic.

Documents are visited in a seeded random order; each one still available is selected and every available
neighbour closer than ``tau`` (cosine) is withdrawn, so the LLM does not spend calls on near-duplicates.
Neighbours come from an auxiliary IVF index (``range_search``), or an exact flat index on small corpora.
IVF search is approximate: a neighbour in a list that was not probed survives, as in the paper.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from syntra_dspy.errors import ConfigError

if TYPE_CHECKING:
    from syntra_dspy.retrieval.index import CorpusIndex

logger = logging.getLogger(__name__)

EXACT_BELOW = 1000  # corpora smaller than this use an exact flat index for neighbour search
_QUERY_BLOCK = 256  # documents whose neighbours are fetched per FAISS call


@dataclass(frozen=True)
class IVFParams:
    """Auxiliary IVF settings (the reference implementation's rule of thumb)."""

    nlist: int
    nprobe: int
    train_size: int

    @classmethod
    def for_size(cls, n: int) -> IVFParams:
        """nlist = min(4*sqrt(N), N//39 + 1); nprobe = max(8, sqrt(nlist)); train on min(256*nlist, N)."""
        nlist = max(1, min(int(4 * math.sqrt(n)), n // 39 + 1))
        nprobe = min(nlist, max(8, int(math.sqrt(nlist))))
        return cls(nlist=nlist, nprobe=nprobe, train_size=min(256 * nlist, n))


def _neighbour_index(vectors: np.ndarray, rng: np.random.Generator, seed: int) -> tuple[Any, str]:
    """An IVF inner-product index for large inputs, an exact flat one for small ones."""
    import faiss

    n, dim = vectors.shape
    if n >= EXACT_BELOW:
        params = IVFParams.for_size(n)
        if params.nlist >= 2:
            quantizer = faiss.IndexFlatIP(dim)
            ivf = faiss.IndexIVFFlat(quantizer, dim, params.nlist, faiss.METRIC_INNER_PRODUCT)
            ivf.cp.seed = int(seed) & 0x7FFFFFFF
            ivf.cp.min_points_per_centroid = 32  # N//39+1 lists can fall a few points short of 39 each
            sample = np.sort(rng.choice(n, size=params.train_size, replace=False))
            try:
                ivf.train(np.ascontiguousarray(vectors[sample]))
            except RuntimeError as exc:
                logger.info("IVF training failed (%s); using exact neighbour search", exc)
            else:
                ivf.add(vectors)
                ivf.nprobe = params.nprobe
                return ivf, f"IVF nlist={params.nlist} nprobe={params.nprobe}"
    flat = faiss.IndexFlatIP(dim)
    flat.add(vectors)
    return flat, "exact"


def select_diverse(index: CorpusIndex, *, target: int | None = None, tau: float = 0.6,
                   seed: int = 42) -> list[str]:
    """Pick up to ``target`` documents (None: no limit) so no picked pair is closer than ``tau``.

    Returns document ids in selection order. The same index, ``tau`` and ``seed`` give the same list.
    """
    if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not 0.0 < float(tau) <= 1.0:
        raise ConfigError(f"tau must be in (0, 1], got {tau!r}", field="tau",
                          hint="the paper uses 0.6; higher keeps more near-duplicates")
    if target is not None and (isinstance(target, bool) or not isinstance(target, int) or target < 1):
        raise ConfigError(f"target must be a positive integer or None, got {target!r}", field="target",
                          hint="omit it to select until the corpus is exhausted")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"seed must be an integer, got {seed!r}", field="seed")

    vectors = np.ascontiguousarray(index.vectors, dtype=np.float32)
    n = vectors.shape[0]
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    neighbours, how = _neighbour_index(vectors, rng, seed)

    available = np.ones(n, dtype=bool)
    selected: list[int] = []
    dropped = 0
    limit = n if target is None else min(target, n)
    radius = float(tau)
    pos = 0
    while pos < n and len(selected) < limit:
        # Fetch neighbours for a block of still-available documents at once; whether a document is
        # picked depends only on earlier ones, so this matches the one-at-a-time algorithm exactly.
        block: list[int] = []
        while pos < n and len(block) < min(_QUERY_BLOCK, limit - len(selected)):
            if available[order[pos]]:
                block.append(int(order[pos]))
            pos += 1
        if not block:
            continue
        lims, _, labels = neighbours.range_search(vectors[block], radius)
        for j, d in enumerate(block):
            if len(selected) >= limit:
                break
            if not available[d]:
                continue
            selected.append(d)
            available[d] = False
            hits = labels[lims[j]:lims[j + 1]]
            hits = hits[(hits >= 0) & available[np.clip(hits, 0, n - 1)]]
            available[hits] = False
            dropped += int(hits.size)
        if not available.any():
            break
    logger.info("diverse selection (%s, tau=%.2f, seed=%d): selected %d of %d documents, "
                "%d dropped as neighbours", how, radius, seed, len(selected), n, dropped)
    return [index.ids[i] for i in selected]
