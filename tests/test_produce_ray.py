"""``produce --ray`` on a local Ray cluster (127.0.0.1, 2 CPUs) against the loopback OpenAI-compatible server.

The records must not depend on where documents ran: a Ray run exports byte for byte what a single process
exports. A worker killed with SIGKILL is restarted by Ray and its documents rerun, each committed once; a driver
killed with SIGKILL leaves its finished documents, and the same command resumes with none done twice. Skipped
where Ray is not installed, except the check that ``--ray`` then says how to install it.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from syntra_dspy.cli import main
from syntra_dspy.errors import ConfigError, DependencyError
from syntra_dspy.lm import OpenAICompatibleServer
from syntra_dspy.production import RayOptions, export_records, produce
from syntra_dspy.production.ray_cluster import worker_shares
from syntra_dspy.testing import SyntraBrain, scripted_lm

from conftest import REPO
from test_produce_resume import _done, kill_9_once_done
from test_produce_support import mini_artifact, read_jsonl, rows

DOCS, LATENCY = 10, 0.1
SETTINGS = {"docs": DOCS, "queries_per_doc": 2, "top_k": 8, "chunk_size": 4}
_CLI = "import sys; from syntra_dspy.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    return mini_artifact(tmp_path_factory)


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster whose workers import this checkout (PYTHONPATH is inherited by every worker)."""
    ray = pytest.importorskip("ray")
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), saved) if p)
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "180")  # a busy test machine starts Ray slowly
    try:
        context = ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=True,
                           _node_ip_address="127.0.0.1")
        yield ray, context.address_info["address"]
    finally:
        ray.shutdown()
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


@pytest.fixture(scope="module")
def reference(mini, minilm, tmp_path_factory):
    """The single-process export of the same run, against the same kind of server."""
    art, index = mini
    root = tmp_path_factory.mktemp("ray-reference")
    with OpenAICompatibleServer(SyntraBrain()) as server:
        produce(art, root / "ref.db", generator=f"hosted_vllm/fake@{server.base_url}", concurrency=4,
                index_dir=index, encoder=minilm, progress=False, **SETTINGS)
    export_records(root / "ref.db", root / "ref.jsonl")
    return (root / "ref.jsonl").read_bytes()


def _workers(ray) -> list:
    """The live document workers of this job's produce runs (found by their actor names)."""
    names = [name for name in ray.util.list_named_actors() if name.startswith("syntra-produce-")]
    return [ray.get_actor(name) for name in names]


def _settled(store, reference: bytes, tmp_path) -> None:
    """Every planned document done exactly once, and the export is the single-process one."""
    assert rows(store, "SELECT count(*), sum(attempts) FROM documents WHERE status = 'done'")[0] == (DOCS, DOCS)
    export_records(store, tmp_path / "run.jsonl")
    records = read_jsonl(tmp_path / "run.jsonl")
    assert records and len({r["query_id"] for r in records}) == len(records)
    assert (tmp_path / "run.jsonl").read_bytes() == reference


def test_without_ray_the_flag_says_how_to_install_it(mini, minilm, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    art, index = mini
    with pytest.raises(DependencyError, match=r'pip install "syntra-dspy\[ray\]"'):
        produce(art, tmp_path / "run.db", generator="hosted_vllm/fake@http://127.0.0.1:9/v1", index_dir=index,
                encoder=minilm, progress=False, ray=RayOptions(), **SETTINGS)
    assert not (tmp_path / "run.db").exists()  # refused before anything was written
    assert main(["produce", str(art), "--store", str(tmp_path / "run.db"), "--ray", "--index-dir", str(index)]) == 2


def test_a_worker_rebuilds_the_drivers_inputs_from_its_plan(mini, minilm):
    """The plan crosses to a worker as JSON and carries the config as the driver resolved it (top_k capped, the
    artifact's chunk size); the worker loads the same inputs from it. Ray itself is not needed to check that."""
    import json

    from syntra_dspy.production import ProduceConfig
    from syntra_dspy.production.ray_worker import DocumentWorker, WorkerPlan, worker_plan
    from syntra_dspy.production.setup import load_inputs
    from syntra_dspy.task import LMSpec

    art, index = mini
    config = ProduceConfig(index_dir=index, top_k=10**6, queries_per_doc=2, retry_temperature=0.3,
                           ray=RayOptions(workers=1))
    inputs = load_inputs(art, config, encoder=minilm)
    with OpenAICompatibleServer(SyntraBrain()) as server:
        plan = worker_plan(inputs, LMSpec(model="hosted_vllm/fake", api_base=server.base_url), config, corpus=None)
        sent = json.loads(json.dumps(plan.model_dump(mode="json")))
        assert WorkerPlan.model_validate(sent) == plan
        assert plan.config.top_k == len(inputs.corpus) and plan.config.chunk_size == inputs.settings.chunk_size
        assert plan.config.ray is None and plan.config.index_dir.is_absolute()
        worker = DocumentWorker(sent, slots=1)
    assert worker.pipeline.settings == inputs.settings and worker.pipeline.retry_temperature == 0.3


def test_ray_needs_a_named_generator_and_a_slot_per_worker(mini, minilm, tmp_path):
    art, index = mini
    with pytest.raises(ConfigError, match="generator must be named"):
        produce(art, tmp_path / "run.db", generator=scripted_lm(), index_dir=index, encoder=minilm,
                progress=False, ray=RayOptions(), **SETTINGS)
    fake = SimpleNamespace(cluster_resources=lambda: {"CPU": 2.0})
    assert worker_shares(fake, RayOptions(), 5) == ([3, 2], 1.0)
    assert worker_shares(fake, RayOptions(workers=4), 6) == ([2, 2, 1, 1], 0.5)
    with pytest.raises(ConfigError, match="--concurrency 4 or more"):
        worker_shares(fake, RayOptions(workers=4), 3)
    with pytest.raises(ConfigError, match="positive integer"):
        RayOptions(workers=0)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ray_run_exports_what_a_single_process_exports(cluster, mini, minilm, reference, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="syntra_dspy.production")
    art, index = mini
    with OpenAICompatibleServer(SyntraBrain(), latency=0.02) as server:
        summary = produce(art, tmp_path / "run.db", generator=f"hosted_vllm/fake@{server.base_url}", concurrency=4,
                          index_dir=index, encoder=minilm, progress=False, ray=RayOptions(workers=2), **SETTINGS)
        peak, requests = server.in_flight_peak, server.requests
    assert summary.status == "completed" and summary.documents["done"] == DOCS
    assert summary.calls == requests and 2 <= peak <= 4  # both workers call at once, never beyond --concurrency
    options = rows(tmp_path / "run.db", "SELECT options FROM sessions")[0][0]
    assert '"ray": {"address": null, "workers": 2}' in options
    progress = [r.getMessage() for r in caplog.records if r.getMessage().startswith("progress:")]
    assert progress and f"{DOCS}/{DOCS} documents" in progress[-1]  # the pace is on the driver's log
    assert all(word in progress[-1] for word in ("documents (", "tokens/s", "failures"))
    _settled(tmp_path / "run.db", reference, tmp_path)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_worker_killed_mid_run_is_replaced_and_nothing_is_lost_or_doubled(cluster, mini, minilm, reference,
                                                                            tmp_path):
    ray, _ = cluster
    art, index = mini
    store = tmp_path / "run.db"
    outcome: dict = {}
    with OpenAICompatibleServer(SyntraBrain(), latency=LATENCY) as server:
        def run() -> None:
            try:
                outcome["summary"] = produce(art, store, generator=f"hosted_vllm/fake@{server.base_url}",
                                             concurrency=2, index_dir=index, encoder=minilm, progress=False,
                                             ray=RayOptions(workers=2), **SETTINGS)
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                outcome["error"] = exc

        driver = threading.Thread(target=run)
        driver.start()
        try:
            deadline = time.monotonic() + 240
            while _done(store) < 2 and driver.is_alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            victim = _workers(ray)[0]
            pid = ray.get(victim.info.options(concurrency_group="control").remote())["pid"]
            os.kill(pid, signal.SIGKILL)
            killed_at = _done(store)
        finally:
            driver.join(timeout=300)
    assert "error" not in outcome, outcome.get("error")
    assert killed_at < DOCS, "the kill must land mid-run"
    assert outcome["summary"].status == "completed"
    assert [r[0] for r in rows(store, "SELECT status FROM sessions")] == ["completed"]
    _settled(store, reference, tmp_path)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_killed_driver_resumes_with_nothing_lost_or_doubled(cluster, mini, reference, tmp_path, monkeypatch):
    _, address = cluster
    art, index = mini
    store = tmp_path / "run.db"
    brain = SyntraBrain()
    with OpenAICompatibleServer(brain, latency=LATENCY) as server:
        command = [sys.executable, "-c", _CLI, "produce", str(art), "--store", str(store), "--docs", str(DOCS),
                   "--queries-per-doc", "2", "--top-k", "8", "--chunk-size", "4", "--concurrency", "2",
                   "--generator", f"hosted_vllm/fake@{server.base_url}", "--index-dir", str(index), "--no-progress",
                   "--ray", address, "--ray-workers", "2"]
        proc = subprocess.Popen(command, cwd=tmp_path, env=os.environ.copy(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        kill_9_once_done(proc, store, done=3, within=240)
        time.sleep(3)  # Ray stops the dead driver's workers; let their last calls reach the server
        kept = dict(rows(store, "SELECT doc_id, session_id FROM documents WHERE status != 'pending'"))
        assert 3 <= len(kept) < DOCS, "the kill must land mid-run"
        extracts_before = brain.calls["extract"]

        monkeypatch.chdir(tmp_path)
        assert main(command[3:]) == 0  # the same command, in this process (already connected to the cluster)

    assert brain.calls["extract"] - extracts_before == DOCS - len(kept)  # only the unfinished documents ran
    after = dict(rows(store, "SELECT doc_id, session_id FROM documents"))
    assert all(after[d] == s for d, s in kept.items())
    assert [r[0] for r in rows(store, "SELECT status FROM sessions ORDER BY id")] == ["killed", "completed"]
    _settled(store, reference, tmp_path)
