"""Production in-process with the scripted brain: the store, the pipeline rules, failures, resume rules."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from syntra_dspy.errors import ArtifactError, ConfigError
from syntra_dspy.retrieval.index import CorpusIndex
from syntra_dspy.languages import check_language
from syntra_dspy.production import RunStore, StoreError, export_records, produce
from syntra_dspy.production.setup import resolve_encoder
from syntra_dspy.programs import context as ctx
from syntra_dspy.retrieval.selection import select_diverse
from syntra_dspy.testing import SyntraBrain, fields_of, scripted_lm

from test_produce_support import SabotageBrain, mini_artifact, prefix, read_jsonl, rows

K, CHUNK, QUERIES = 7, 3, 3


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    return mini_artifact(tmp_path_factory)


@pytest.fixture(scope="module")
def corpus(mini):
    from syntra_dspy.artifacts import load_artifact
    from syntra_dspy.retrieval.corpus import read_corpus

    spec = load_artifact(mini[0]).manifest["task_spec"]["corpus"]
    return read_corpus(spec["path"], spec["format"])


def run(mini, minilm, store, brain=None, **kw):
    art, index = mini
    lm = scripted_lm(brain or SyntraBrain())
    kw.setdefault("docs", 6)
    kw.setdefault("queries_per_doc", QUERIES)
    kw.setdefault("top_k", K)
    kw.setdefault("chunk_size", CHUNK)
    return produce(art, store, generator=lm, index_dir=index, encoder=minilm, progress=False, **kw), lm


@pytest.fixture(scope="module")
def baseline(mini, minilm, tmp_path_factory):
    store = tmp_path_factory.mktemp("baseline") / "run.db"
    summary, lm = run(mini, minilm, store, concurrency=4)
    return store, summary, lm


def planned(mini, n):
    return select_diverse(CorpusIndex.load(mini[1]), target=n, tau=0.6, seed=42)


def test_run_store_records_artifact_settings_and_every_unit(baseline, mini):
    from syntra_dspy.artifacts import load_artifact

    store, summary, _ = baseline
    artifact = load_artifact(mini[0])
    assert summary.status == "completed" and summary.processed == 6
    assert summary.documents == {"planned": 6, "pending": 0, "done": 6, "partial": 0, "failed": 0}
    with RunStore.open(store, readonly=True) as run:
        meta = run.meta()
        assert meta["kind"] == "syntra-dspy/run-store" and meta["schema_version"] == 1
        assert meta["artifact"]["version"] == artifact.version
        assert meta["artifact"]["checksum"] == artifact.checksum
        assert meta["settings"]["top_k"] == K and meta["settings"]["chunk_size"] == CHUNK
        assert meta["identity"]["encoder"] == artifact.manifest["fingerprints"]["encoder"]
        assert run.planned() == planned(mini, 6)
        usage = run.usage()
    assert set(usage) == {"extract", "plan", "write", "annotate"}
    assert usage["extract"]["calls"] == 6 and usage["annotate"]["calls"] == 6 * QUERIES * -(-K // CHUNK)
    assert all(u["prompt_tokens"] > 0 and u["latency_s"] is not None for u in usage.values())
    assert rows(store, "PRAGMA journal_mode")[0][0] == "wal"
    per_doc = rows(store, "SELECT doc_id, count(*) FROM queries GROUP BY doc_id")
    assert len(per_doc) == 6 and all(n == QUERIES for _, n in per_doc)
    assert rows(store, "SELECT count(*), count(label) FROM candidates")[0] == (6 * QUERIES * K,) * 2
    # the source document is recorded where retrieval found it, and only there
    for qid, doc_id, source_rank in rows(store, "SELECT query_id, doc_id, source_rank FROM queries"):
        ranks = [r for r, in rows(store, "SELECT rank FROM candidates WHERE query_id=? AND doc_id=?", (qid, doc_id))]
        assert ranks == ([] if source_rank is None else [source_rank])


def test_each_session_records_the_code_that_ran_it(baseline):
    import subprocess

    import syntra_dspy
    from syntra_dspy.code_version import code_version

    (options,), = rows(baseline[0], "SELECT options FROM sessions")
    code = json.loads(options)["code"]
    assert code == code_version() and code["syntra_dspy"] == syntra_dspy.__version__
    root = Path(syntra_dspy.__file__).resolve().parent.parent
    found = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    if (root / ".git").exists() and found.returncode == 0:  # run from a checkout: the commit is named
        assert code["git_commit"] == found.stdout.strip() and isinstance(code["git_dirty"], bool)
    else:
        assert code["git_commit"] is None


def test_every_prompt_starts_with_the_artifacts_fixed_instruction(baseline, mini):
    from syntra_dspy.artifacts import load_artifact

    _, _, lm = baseline
    recorded = {v["system_prompt"] for v in load_artifact(mini[0]).manifest["prompts"].values()}
    assert lm.calls
    for call in lm.calls:
        assert call.messages[0]["role"] == "system" and call.messages[0]["content"] in recorded


def test_blueprints_queries_and_language_follow_the_rules(baseline):
    store = baseline[0]
    for doc_id, features in rows(store, "SELECT doc_id, features FROM documents"):
        f = json.loads(features)
        idents = {i["text"] for i in f["identifiers"]}
        dims = {d["dimension"]: set(d["options"]) for d in f["attributes"]}
        combos = set()
        texts = []
        for bp, text in rows(store, "SELECT blueprint, text FROM queries WHERE doc_id=? ORDER BY position", (doc_id,)):
            bp = json.loads(bp)
            assert bp["identifier"] in idents
            assert [c["dimension"] for c in bp["choices"]] == list(dims)
            assert all(c["option"] in dims[c["dimension"]] for c in bp["choices"])
            combos.add((bp["identifier"], tuple(c["option"] for c in bp["choices"])))
            texts.append(text)
        assert len(combos) == QUERIES and len(set(texts)) == QUERIES
        assert all(t.strip() and check_language(t, "en") is None for t in texts)


def test_labels_are_mapped_back_from_local_chunk_ids(baseline, mini, corpus):
    from syntra_dspy.artifacts import load_artifact

    system = load_artifact(mini[0]).program.annotate.signature.instructions
    store = baseline[0]
    checked = 0
    for query, doc_id, label in rows(store, "SELECT q.text, c.doc_id, c.label FROM candidates c "
                                            "JOIN queries q ON q.query_id = c.query_id"):
        shown = f"[doc_id 0] {ctx.clip(corpus[doc_id].content, 1500)}"
        expected = SyntraBrain.annotate(system, {"query": query, "candidates": shown})["judgements"][0]["score"]
        assert label == expected
        checked += 1
    labels = {label for label, in rows(store, "SELECT DISTINCT label FROM candidates")}
    assert checked == 6 * QUERIES * K and len(labels) >= 2  # not a constant answer


def test_invalid_outputs_are_retried_then_recorded_never_fatal(mini, minilm, corpus, tmp_path):
    docs = [corpus[d].content for d in planned(mini, 8)]
    brain = SabotageBrain(bad_extract=[docs[0]], chinese_always=[docs[1]], chinese_once=[docs[2]],
                          bad_labels=[docs[3]])
    store = tmp_path / "run.db"
    summary, _ = run(mini, minilm, store, brain, docs=8, concurrency=3)
    assert summary.status == "completed"
    assert summary.documents == {"planned": 8, "pending": 0, "done": 5, "partial": 1, "failed": 2}
    ids = planned(mini, 8)
    status = dict(rows(store, "SELECT doc_id, status || ':' || coalesce(stage, '') FROM documents"))
    assert status[ids[0]] == "failed:extract" and status[ids[1]] == "failed:write" and status[ids[2]] == "done:"
    assert status[ids[3]] == "partial:"
    errors = dict(rows(store, "SELECT doc_id, error FROM documents WHERE status='failed'"))
    assert "identifier" in errors[ids[0]] and "not written in English" in errors[ids[1]]
    # each failure keeps the model's last raw answer, so a user can see why it was rejected
    details = {(d, s): json.loads(x) for d, s, x in rows(store, "SELECT doc_id, stage, detail FROM failures")}
    assert "号研究的证据" in details[(ids[1], "write")]["last_answer"]
    assert '"identifiers": []' in details[(ids[0], "extract")]["last_answer"]
    # the repaired document's queries are English; the failed one's were never stored
    assert all(check_language(t, "en") is None for t, in rows(store, "SELECT text FROM queries"))
    assert rows(store, "SELECT count(*) FROM queries WHERE doc_id=?", (ids[1],))[0][0] == 0
    # exactly one chunk of the sabotaged query failed; its candidates stay unlabelled, the rest are labelled
    failures = rows(store, "SELECT doc_id, query_id, stage, kind, detail FROM failures WHERE stage='annotate'")
    assert len(failures) == 1 and failures[0][0] == ids[3] and failures[0][3] == "output"
    unlabelled = rows(store, "SELECT query_id, count(*) FROM candidates WHERE label IS NULL GROUP BY query_id")
    assert unlabelled == [(failures[0][1], len(json.loads(failures[0][4])["doc_ids"]))]
    assert '"judgements"' in json.loads(failures[0][4])["last_answer"]
    assert summary.failures_by_stage == {"extract": 1, "write": 1, "annotate": 1}
    # the repair note reached the model: write was asked twice for the Chinese-once document
    assert brain.calls["write"] >= 8 + 1
    out = export_records(store, tmp_path / "train.jsonl")
    assert out.dropped["annotation_incomplete"] == 1
    assert failures[0][1] not in {r["query_id"] for r in read_jsonl(tmp_path / "train.jsonl")}


def test_a_failing_planner_is_asked_once_and_its_valid_blueprints_are_kept(mini, minilm, corpus, tmp_path):
    from syntra_dspy.production.pipeline import PLAN_RETRIES

    ids = planned(mini, 2)
    docs = [corpus[d].content for d in ids]
    brain = SabotageBrain(bad_plan=[docs[0]])
    store = tmp_path / "run.db"
    summary, _ = run(mini, minilm, store, brain, docs=2, concurrency=1)
    assert summary.documents["done"] == 2  # degraded, not dropped
    assert brain.plan_calls == {prefix(docs[0]): 1 + PLAN_RETRIES} and PLAN_RETRIES == 0
    (stage, detail), = rows(store, "SELECT stage, detail FROM failures WHERE doc_id=?", (ids[0],))
    assert stage == "plan" and json.loads(detail)["planned"] == 1 and json.loads(detail)["blueprints"] == QUERIES
    blueprints = [json.loads(b) for b, in rows(store, "SELECT blueprint FROM queries WHERE doc_id=? ORDER BY position",
                                              (ids[0],))]
    assert len(blueprints) == QUERIES and len({json.dumps(b, sort_keys=True) for b in blueprints}) == QUERIES
    assert all(c["option"] != "made-up option" for b in blueprints for c in b["choices"])
    # the planner's one valid blueprint stays first; the rest were drawn in code
    assert blueprints[0] == brain.plan_answers[prefix(docs[0])][0]


def test_planner_code_makes_no_plan_call_and_spreads_identifiers_and_options(mini, minilm, tmp_path):
    brain = SyntraBrain()
    store = tmp_path / "run.db"
    summary, _ = run(mini, minilm, store, brain, docs=3, concurrency=1, planner="code")
    assert summary.documents["done"] == 3
    assert "plan" not in brain.calls and brain.calls["write"] >= 3  # no plan call; the writer still writes
    assert not rows(store, "SELECT 1 FROM usage WHERE stage='plan'")
    assert not rows(store, "SELECT 1 FROM failures WHERE stage='plan'")  # a choice, not a fallback
    (options,), = rows(store, "SELECT options FROM sessions")
    assert json.loads(options)["planner"] == "code"
    by_doc: dict[str, list[dict]] = {}
    for doc_id, blueprint in rows(store, "SELECT doc_id, blueprint FROM queries ORDER BY doc_id, position"):
        by_doc.setdefault(doc_id, []).append(json.loads(blueprint))
    assert len(by_doc) == 3
    for blueprints in by_doc.values():
        assert len(blueprints) == QUERIES
        assert len({b["identifier"] for b in blueprints}) == QUERIES  # one identifier each while there are enough
        options = [tuple(c["option"] for c in b["choices"]) for b in blueprints]
        assert len(set(options)) > 1  # the options turn from one blueprint to the next


def test_the_compact_prompt_format_sends_fewer_tokens_for_the_same_records(mini, minilm, tmp_path):
    """The scripted brain reads the same inputs in either format, so the records are the same; the writing steps'
    prompts are shorter, the judge's the same."""
    stores = {fmt: tmp_path / f"{fmt}.db" for fmt in ("json", "compact")}
    lms = {fmt: run(mini, minilm, store, docs=3, concurrency=1, prompt_format=fmt)[1] for fmt, store in stores.items()}
    for fmt, store in stores.items():
        export_records(store, tmp_path / f"{fmt}.jsonl")
    records = {fmt: (tmp_path / f"{fmt}.jsonl").read_bytes() for fmt in stores}
    assert records["compact"] == records["json"] and records["json"].count(b"\n") >= 3
    usage = {}
    for fmt, store in stores.items():
        with RunStore.open(store, readonly=True) as r:
            usage[fmt] = r.usage()
    for step in ("extract", "plan", "write"):
        assert usage["compact"][step]["calls"] == usage["json"][step]["calls"]
        assert usage["compact"][step]["prompt_tokens"] < 0.8 * usage["json"][step]["prompt_tokens"], step
    assert [usage["compact"]["annotate"][k] for k in ("calls", "prompt_tokens")] == [
        usage["json"]["annotate"][k] for k in ("calls", "prompt_tokens")]
    (options,), = rows(stores["compact"], "SELECT options FROM sessions")
    assert json.loads(options)["prompt_format"] == "compact"
    judged = [c for c in lms["compact"].calls if c.output_fields == ("judgements",)]
    written = [c for c in lms["compact"].calls if c.output_fields != ("judgements",)]
    assert judged and all(c.system.startswith("Your input fields are:") for c in judged)  # as its κ was measured
    assert written and all("[[ ##" not in c.system and "\n## Answer\nOne JSON object: {" in c.system for c in written)


def test_the_lm_planner_is_the_default(baseline):
    (options,), = rows(baseline[0], "SELECT options FROM sessions")
    assert json.loads(options)["planner"] == "lm"
    assert rows(baseline[0], "SELECT calls FROM usage WHERE stage='plan'")[0][0] > 0


class ChineseDimensions(SyntraBrain):
    """Extracts its query dimensions in Chinese for an English task (the CSL run's extractor did for every
    document), so only the generic default dimensions are left."""

    @staticmethod
    def extract(system, inputs):
        answer = SyntraBrain.extract(system, inputs)
        return {**answer, "attributes": [{"dimension": "具体程度", "options": ["高", "低"]}]}


def test_a_document_left_with_the_default_dimensions_gets_code_drawn_blueprints_without_a_planner_call(
        mini, minilm, tmp_path):
    from syntra_dspy.programs.validation import DEFAULT_ATTRIBUTES

    store = tmp_path / "run.db"
    brain = ChineseDimensions()
    summary, _ = run(mini, minilm, store, brain, docs=2, concurrency=1)
    assert summary.documents["done"] == 2
    assert "plan" not in brain.calls and brain.calls["write"] >= 2
    assert rows(store, "SELECT count(*) FROM failures") == [(0,)]
    for doc_id, features in rows(store, "SELECT doc_id, features FROM documents"):
        assert [d["dimension"] for d in json.loads(features)["attributes"]] == [d.dimension for d in DEFAULT_ATTRIBUTES]
        blueprints = [json.loads(b) for b, in rows(store, "SELECT blueprint FROM queries WHERE doc_id=?", (doc_id,))]
        assert len(blueprints) == QUERIES and len({json.dumps(b, sort_keys=True) for b in blueprints}) == QUERIES
    # with dimensions of its own, the planner is asked
    other = SyntraBrain()
    run(mini, minilm, tmp_path / "planned.db", other, docs=1, concurrency=1)
    assert other.calls["plan"] == 1


def test_failed_documents_are_redone_only_with_retry_failed_and_resampled(mini, minilm, corpus, tmp_path):
    docs = [corpus[d].content for d in planned(mini, 4)]
    store = tmp_path / "run.db"
    brain = SabotageBrain(bad_extract=[docs[0]], bad_labels=[docs[1]])  # fails at temperature 0, every time
    run(mini, minilm, store, brain, docs=4)
    again, lm = run(mini, minilm, store, brain, docs=4)
    assert again.processed == 0 and lm.calls == []
    fixed, lm = run(mini, minilm, store, brain, docs=4, retry_failed=True)
    assert fixed.processed == 2 and fixed.documents["done"] == 4
    assert lm.calls and all(c.options["temperature"] == 0.7 for c in lm.calls)  # a fresh sample, not a replay
    with RunStore.open(store, readonly=True) as r:
        assert r.failures(current=True) == [] and len(r.failures(current=False)) == 2
    assert rows(store, "SELECT count(*) FROM queries")[0][0] == 4 * QUERIES  # replaced, not duplicated
    assert sorted(a for a, in rows(store, "SELECT attempts FROM documents")) == [1, 1, 2, 2]


KEPT_SQL = ("SELECT q.query_id, q.position, q.text, q.blueprint, c.rank, c.doc_id, c.score, c.label FROM queries q "
            "JOIN candidates c ON c.query_id = q.query_id WHERE q.doc_id = ? AND q.position IN (0, 2) "
            "ORDER BY q.position, c.rank")


def test_a_retry_keeps_the_complete_queries_and_writes_only_the_missing_one(mini, minilm, corpus, tmp_path):
    ids = planned(mini, 3)
    docs = [corpus[d].content for d in ids]
    store = tmp_path / "run.db"
    brain = SabotageBrain(chinese_second=[docs[0]])  # blueprint 1's query stays Chinese at temperature 0
    first, _ = run(mini, minilm, store, brain, docs=3)
    assert first.documents["partial"] == 1
    assert [p for p, in rows(store, "SELECT position FROM queries WHERE doc_id=? ORDER BY position",
                             (ids[0],))] == [0, 2]
    (detail,), = rows(store, "SELECT detail FROM failures WHERE doc_id=? AND stage='write'", (ids[0],))
    assert json.loads(detail)["missing_blueprints"] == [1]
    kept = rows(store, KEPT_SQL, (ids[0],))
    assert len(kept) == 2 * K

    before = dict(brain.calls)
    fixed, lm = run(mini, minilm, store, brain, docs=3, retry_failed=True)
    assert fixed.processed == 1 and fixed.documents["done"] == 3
    calls = {step: n - before.get(step, 0) for step, n in brain.calls.items() if n > before.get(step, 0)}
    # no extraction again (the features are kept), one plan and one write call for the one missing blueprint, and
    # only the new query's candidates are labelled
    assert calls == {"plan": 1, "write": 1, "annotate": -(-K // CHUNK)}
    (write_call,) = [c for c in lm.calls if "queries" in c.output_fields]
    assert fields_of(write_call.user)["blueprints"].count("identifier:") == 1
    assert rows(store, KEPT_SQL, (ids[0],)) == kept  # the kept queries, their candidates and labels, untouched
    texts = rows(store, "SELECT position, text, blueprint FROM queries WHERE doc_id=? ORDER BY position", (ids[0],))
    assert [p for p, _, _ in texts] == [0, 1, 2] and check_language(texts[1][1], "en") is None
    assert len({b for _, _, b in texts}) == 3  # the new blueprint repeats neither kept one
    assert rows(store, "SELECT count(*) FROM candidates c JOIN queries q ON q.query_id = c.query_id "
                       "WHERE q.doc_id=?", (ids[0],))[0][0] == 3 * K
    with RunStore.open(store, readonly=True) as r:
        assert r.failures(current=True) == []
    assert rows(store, "SELECT attempts, n_queries FROM documents WHERE doc_id=?", (ids[0],)) == [(2, 3)]


def test_a_retry_that_fails_again_leaves_the_kept_queries_and_the_document_partial(mini, minilm, corpus, tmp_path):
    ids = planned(mini, 2)
    docs = [corpus[d].content for d in ids]
    store = tmp_path / "run.db"
    brain = SabotageBrain(chinese_second=[docs[0]], chinese_hot=[docs[0]])  # a fresh sample does not help
    run(mini, minilm, store, brain, docs=2)
    kept = rows(store, KEPT_SQL, (ids[0],))
    records = export_records(store, tmp_path / "before.jsonl").records
    again, _ = run(mini, minilm, store, brain, docs=2, retry_failed=True)
    assert again.processed == 1 and again.documents == {"planned": 2, "pending": 0, "done": 1, "partial": 1,
                                                        "failed": 0}
    assert rows(store, KEPT_SQL, (ids[0],)) == kept
    assert rows(store, "SELECT status, stage, attempts, n_queries FROM documents WHERE doc_id=?", (ids[0],)) == \
        [("partial", None, 2, 2)]
    with RunStore.open(store, readonly=True) as r:
        current = r.failures(current=True)
    assert [(f["doc_id"], f["stage"]) for f in current] == [(ids[0], "write")]
    assert export_records(store, tmp_path / "after.jsonl").records == records


def test_a_retry_relabels_an_incomplete_query_even_when_its_new_blueprint_stays_without_a_query(mini, minilm, corpus,
                                                                                               tmp_path):
    ids = planned(mini, 2)
    docs = [corpus[d].content for d in ids]
    store = tmp_path / "run.db"
    # blueprint 0's query loses one label chunk, blueprint 1 never gets a valid query, blueprint 2 is fine
    brain = SabotageBrain(bad_labels=[docs[0]], chinese_second=[docs[0]], chinese_hot=[docs[0]])
    run(mini, minilm, store, brain, docs=2)
    assert rows(store, "SELECT position, complete FROM queries WHERE doc_id=? ORDER BY position", (ids[0],)) == \
        [(0, 0), (2, 1)]
    text = rows(store, "SELECT text FROM queries WHERE doc_id=? AND position=0", (ids[0],))
    run(mini, minilm, store, brain, docs=2, retry_failed=True)
    assert rows(store, "SELECT position, complete FROM queries WHERE doc_id=? ORDER BY position", (ids[0],)) == \
        [(0, 1), (2, 1)]
    assert rows(store, "SELECT text FROM queries WHERE doc_id=? AND position=0", (ids[0],)) == text
    assert rows(store, "SELECT status FROM documents WHERE doc_id=?", (ids[0],)) == [("partial",)]
    with RunStore.open(store, readonly=True) as r:
        assert [(f["stage"], json.loads(f["detail"])["missing_blueprints"]) for f in r.failures()
                if f["doc_id"] == ids[0]] == [("write", [1])]


def test_resume_refuses_settings_that_change_records(baseline, mini, minilm, tmp_path):
    store = tmp_path / "run.db"
    shutil.copy(baseline[0], store)
    with pytest.raises(ConfigError, match="top_k"):
        run(mini, minilm, store, top_k=K + 1)
    with pytest.raises(ConfigError, match="queries_per_doc"):
        run(mini, minilm, store, queries_per_doc=QUERIES + 1)
    with pytest.raises(ConfigError, match="--docs"):
        run(mini, minilm, store, docs=3)
    same, lm = run(mini, minilm, store)
    assert same.processed == 0 and lm.calls == []


def test_more_docs_extends_the_plan_and_keeps_finished_units(baseline, mini, minilm, tmp_path):
    store = tmp_path / "run.db"
    shutil.copy(baseline[0], store)
    brain = SyntraBrain()
    more, _ = run(mini, minilm, store, brain, docs=8)
    assert more.processed == 2 and brain.calls["extract"] == 2
    with RunStore.open(store, readonly=True) as r:
        assert r.planned() == planned(mini, 8)


def test_refuses_an_artifact_that_does_not_verify(mini, minilm, tmp_path):
    art = tmp_path / "art"
    shutil.copytree(mini[0], art)
    manifest = art / "manifest.json"
    manifest.write_text(manifest.read_text().replace("biomedical", "biomedicaI"))
    with pytest.raises(ArtifactError, match="checksum"):
        produce(art, tmp_path / "run.db", generator=scripted_lm(), encoder=minilm, progress=False)
    assert not (tmp_path / "run.db").exists()


def test_encoder_must_match_the_artifacts_unless_named():
    recorded = "all-MiniLM-L6-v2@0000000000000000"
    with pytest.raises(ConfigError, match="--encoder"):
        resolve_encoder(recorded, None)
    assert resolve_encoder(recorded, "all-MiniLM-L6-v2").name == "all-MiniLM-L6-v2"


def test_a_second_writer_is_locked_out(baseline, tmp_path):
    store = tmp_path / "run.db"
    shutil.copy(baseline[0], store)
    with RunStore.open(store), pytest.raises(StoreError, match="another"):
        RunStore.open(store)


def test_concurrency_does_not_change_the_export(baseline, mini, minilm, tmp_path):
    store = tmp_path / "serial.db"
    run(mini, minilm, store, concurrency=1)
    export_records(baseline[0], tmp_path / "a.jsonl")
    export_records(store, tmp_path / "b.jsonl")
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    assert read_jsonl(tmp_path / "a.jsonl")


def test_the_artifacts_generator_is_the_default_and_a_test_lm_is_refused(mini, minilm, tmp_path):
    with pytest.raises(ConfigError, match="--generator"):
        produce(mini[0], tmp_path / "run.db", index_dir=mini[1], encoder=minilm, progress=False, docs=2)


def _documents_at_once(mini, minilm, store, monkeypatch, **lm_kw) -> int:
    """The most documents the pipeline had in progress at one time, over a 4-document run at concurrency 1."""
    import threading
    import time

    from syntra_dspy.production.pipeline import DocumentPipeline

    active, peak, lock = 0, 0, threading.Lock()
    original = DocumentPipeline.run

    def counted(self, *args, **kwargs):
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        try:
            time.sleep(0.05)  # long enough for a second document thread to start, if the runner starts one
            return original(self, *args, **kwargs)
        finally:
            with lock:
                active -= 1

    monkeypatch.setattr(DocumentPipeline, "run", counted)
    art, index = mini
    produce(art, store, generator=scripted_lm(SyntraBrain(), **lm_kw), index_dir=index, encoder=minilm,
            progress=False, docs=4, queries_per_doc=2, top_k=K, chunk_size=CHUNK, concurrency=1)
    return peak


def test_an_engine_sharing_one_context_gets_one_document_at_a_time(mini, minilm, tmp_path, monkeypatch):
    # The embedded engine's calls continue the prompt the previous call left: another document's call in between
    # would evict it. A served model gets a second document per slot, to keep the slot busy between steps.
    assert _documents_at_once(mini, minilm, tmp_path / "one.db", monkeypatch, shares_one_context=True) == 1
    assert _documents_at_once(mini, minilm, tmp_path / "two.db", monkeypatch) == 2
    from syntra_dspy.lm.llamacpp import LlamaCppEngine

    assert LlamaCppEngine.shares_one_context


def test_the_store_keeps_every_write_check_and_stats_say_how_first_answers_fared(mini, minilm, tmp_path):
    """Issue 42: which check rejects the writer's first answers, and what fixing them took, from the run store."""
    from syntra_dspy.production import compute_stats, format_stats

    class CopiesEveryFirstAnswer(SyntraBrain):  # the first write answer copies the document; a rewrite fixes it
        def _route(self, system, inputs, outputs):
            name, answer = super()._route(system, inputs, outputs)
            if name == "write" and not inputs.get("retry_note"):
                document = inputs.get("document", "")
                for q in answer["queries"]:
                    q["query"] = " ".join(document.split()[:14]) + "."
            return name, answer

    store = tmp_path / "run.db"
    summary, lm = run(mini, minilm, store, brain=CopiesEveryFirstAnswer(), docs=2, queries_per_doc=2)
    checks = rows(store, "SELECT doc_id, position, step, outcome FROM write_checks ORDER BY id")
    firsts = {}
    for doc_id, position, step, outcome in checks:
        firsts.setdefault((doc_id, position), (step, outcome))
    assert len(firsts) == 4 and {o for _, o in firsts.values()} <= {"copy", "duplicate"}
    assert all(step == "write" for step, _ in firsts.values())
    rewrites = sum(1 for c in lm.calls if "rewritten" in c.output_fields)
    assert sum(1 for c in checks if c[2] == "rewrite") == rewrites
    stats = compute_stats(store)
    assert sum(stats["write_checks"]["first_answer"].values()) == 4
    line = next(x for x in format_stats(stats).splitlines() if x.startswith("writing"))
    assert "0% of first answers kept (rejected: copy" in line and f"{rewrites} rewrite calls" in line, line
