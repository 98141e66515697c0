"""The maintained benchmarks: each measures something a release should keep true and writes to
``benchmarks/results/<name>/``; ``make bench-<name>`` runs it (``make benchmarks`` lists them). Shared helpers are
in :mod:`benchmarks.common`; the downstream experiment (train, score beside the base encoder, paired comparisons)
is the product's :mod:`syntra_dspy.comparison.downstream`, the one ``syntra compare --downstream`` runs.

* ``baseline_table``: BM25, the base encoder and trained encoders on a BEIR split, with bootstrap CIs.
* ``compare_scifact``: does self-improvement reach human calibration? none, self-improve, GEPA and people's
  qrels as calibration, all compiling the graded judge, scored on 100 held-out SciFact claims.
* ``downstream_scifact``: LoRA encoders trained on a run's records, on people's records and without a judge,
  scored on held-out SciFact claims; ``downstream_csl.sh`` is its cross-language counterpart.
* ``teaching_signal``: how much the same record sets can still teach the base encoder, before training.
* ``judge_agreement`` and ``pool_agreement``: an artifact's judges against people's judgments, per sample and pooled.
* ``engine_speed``, ``produce_scale``, ``train_memory``: the embedded engine's speed, production's throughput on one
  process, several endpoints and Ray, and training's peak memory.
* ``cost_replay``: where a run store's LM time goes, and the judge cascade replayed on stored grades (calls skipped,
  labels changed, agreement with people before and after), with no LM call.
* ``paired_produce``: production before and after a setting on the same documents and artifact (records per
  LM-hour, calls and tokens per record), on the scripted server or a real model.

One-off probes that answered a question are frozen in ``experiments/`` (their results, with the commit they ran on).
"""
