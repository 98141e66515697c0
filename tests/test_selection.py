from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from syntra_dspy.errors import ConfigError
from syntra_dspy.retrieval.index import CorpusIndex
from syntra_dspy.retrieval.selection import IVFParams, select_diverse


def clustered_index(n_clusters: int = 40, per_cluster: int = 10, dim: int = 32, seed: int = 0,
                    spread: float = 0.15) -> CorpusIndex:
    """Tight clusters around random centres: members of a cluster are far above tau, centres far below."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_clusters, dim))
    vecs = np.repeat(centres, per_cluster, axis=0)
    vecs = vecs / np.linalg.norm(vecs, axis=1, keepdims=True) + rng.normal(scale=spread / np.sqrt(dim),
                                                                           size=vecs.shape)
    return CorpusIndex.from_vectors([f"d{i}" for i in range(len(vecs))], vecs.astype(np.float32))


def max_pairwise(index: CorpusIndex, ids: list[str]) -> float:
    v = np.stack([index.vector(i) for i in ids])
    sims = v @ v.T
    np.fill_diagonal(sims, -1.0)
    return float(sims.max())


def test_ivf_params_follow_reference() -> None:
    p = IVFParams.for_size(5183)
    assert (p.nlist, p.nprobe, p.train_size) == (133, 11, 5183)
    p = IVFParams.for_size(1_000_000)
    assert (p.nlist, p.nprobe, p.train_size) == (4000, 63, 1_000_000)


def test_deterministic_and_seed_dependent() -> None:
    index = clustered_index()
    a = select_diverse(index, seed=7)
    assert a == select_diverse(index, seed=7)
    b = select_diverse(index, seed=8)
    assert a != b
    # One pick per cluster whatever the order: the clusters are the diversity unit.
    assert len(a) == len(b) == 40
    assert len({int(i[1:]) // 10 for i in a}) == 40


def test_no_selected_pair_above_tau() -> None:
    index = clustered_index(n_clusters=60, per_cluster=5, dim=8, spread=0.8)
    for tau in (0.3, 0.6, 0.9):
        chosen = select_diverse(index, tau=tau, seed=3)
        assert max_pairwise(index, chosen) <= tau + 1e-6
        # Maximality: every unselected document is within tau of some selected one.
        sel = np.stack([index.vector(i) for i in chosen])
        rest = [i for i in index.ids if i not in set(chosen)]
        if rest:
            assert ((np.stack([index.vector(i) for i in rest]) @ sel.T).max(axis=1) > tau).all()


def test_target_is_respected_and_prefix_consistent() -> None:
    index = clustered_index()
    full = select_diverse(index, seed=1)
    assert select_diverse(index, target=5, seed=1) == full[:5]
    assert select_diverse(index, target=10_000, seed=1) == full
    assert len(select_diverse(index, target=1, seed=1)) == 1


def test_tau_one_keeps_everything_distinct() -> None:
    index = clustered_index(n_clusters=5, per_cluster=4)
    chosen = select_diverse(index, tau=1.0, seed=0)
    assert sorted(chosen) == sorted(index.ids)


@pytest.mark.parametrize("kwargs, field", [
    ({"tau": 0.0}, "tau"), ({"tau": 1.5}, "tau"), ({"tau": -0.1}, "tau"),
    ({"target": 0}, "target"), ({"target": -3}, "target"), ({"target": 2.5}, "target"),
    ({"seed": "x"}, "seed"),
])
def test_validation(kwargs: dict, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        select_diverse(clustered_index(n_clusters=2, per_cluster=2), **kwargs)
    assert info.value.field == field


def test_ivf_path_on_scifact_sized_input(shared_data: Path, caplog) -> None:
    """The full SciFact id list with stand-in random vectors: exercises the IVF route (N >= 1000)."""
    lines = (shared_data / "scifact" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    ids = [json.loads(line)["_id"] for line in lines]
    assert len(ids) == 5183
    rng = np.random.default_rng(0)
    # Random unit vectors are nearly orthogonal; give them a shared direction plus a few duplicates so
    # that tau = 0.6 actually removes neighbours.
    base = rng.normal(size=(len(ids), 64)).astype(np.float32)
    base[1::7] = base[0::7][: len(base[1::7])] + 0.05 * rng.normal(size=base[1::7].shape)
    index = CorpusIndex.from_vectors(ids, base)
    started = time.perf_counter()
    with caplog.at_level("INFO", logger="syntra_dspy.retrieval.selection"):
        first = select_diverse(index, seed=42)
    elapsed = time.perf_counter() - started
    assert "IVF nlist=133 nprobe=11" in caplog.text
    assert first == select_diverse(index, seed=42)
    assert first != select_diverse(index, seed=43)
    assert len(set(first)) == len(first) and set(first) <= set(ids)
    assert len(ids) - len(ids) // 7 - 5 <= len(first) <= len(ids) - len(ids) // 7  # duplicate pairs collapse
    assert select_diverse(index, target=100, seed=42) == first[:100]
    assert elapsed < 20
