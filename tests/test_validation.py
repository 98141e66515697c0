"""Code checks on LM outputs: they turn rule breaks into repair notes instead of bad records."""

from __future__ import annotations

import pytest

from syntra_dspy.languages import check_language
from syntra_dspy.signatures.types import (AttributeChoice, AttributeDimension, Blueprint, CandidateLabel, Identifier,
                                          WrittenQuery)
from syntra_dspy.programs.validation import (OutputRejected, QueriesRejected, check_blueprints, check_labels,
                                            check_queries, clean_features, copied_run, copy_repair)

FEATURES = clean_features(
    [Identifier(kind="entity", text="FGF21"), Identifier(kind="relationship", text="FGF21 lowers SREBP2"),
     Identifier(kind="entity", text="fgf21 ")],
    [AttributeDimension(dimension="specificity", options=["broad", "specific", "Broad"]),
     AttributeDimension(dimension="stance", options=["supports"])],
)


def bp(ident, **choices):
    return Blueprint(identifier=ident, choices=[AttributeChoice(dimension=d, option=o) for d, o in choices.items()])


def test_clean_features_drops_duplicates_and_single_option_dimensions():
    assert [i.text for i in FEATURES.identifiers] == ["FGF21", "FGF21 lowers SREBP2"]
    assert [(d.dimension, d.options) for d in FEATURES.attributes] == [("specificity", ["broad", "specific"])]
    with pytest.raises(OutputRejected, match="at least one identifier"):
        clean_features([], FEATURES.attributes)


def test_for_english_queries_dimensions_and_options_in_chinese_are_dropped_and_identifiers_kept():
    from syntra_dspy.programs.validation import DEFAULT_ATTRIBUTES

    idents = [Identifier(kind="entity", text="小波包"), Identifier(kind="entity", text="fractal analysis")]
    mixed = [AttributeDimension(dimension="specificity", options=["高", "中", "低"]),
             AttributeDimension(dimension="概率水平", options=["high", "low"]),
             AttributeDimension(dimension="expertise", options=["novice", "专家", "expert"])]
    english = clean_features(idents, mixed, query_language="en")
    assert [i.text for i in english.identifiers] == ["小波包", "fractal analysis"]
    assert [(d.dimension, d.options) for d in english.attributes] == [("expertise", ["novice", "expert"])]
    only_chinese = clean_features(idents, mixed[:2], query_language="en")
    assert only_chinese.attributes == DEFAULT_ATTRIBUTES
    # Chinese queries keep them all; without a language nothing changes
    assert len(clean_features(idents, mixed, query_language="zh").attributes) == 3
    assert len(clean_features(idents, mixed).attributes) == 3


def test_identifiers_that_name_no_subject_are_dropped():
    idents = [Identifier(kind="entity", text="本文"), Identifier(kind="entity", text="小波包"),
              Identifier(kind="entity", text="the study"), Identifier(kind="entity", text="陶瓷领域"),
              Identifier(kind="relationship", text="FGF21 lowers SREBP2")]
    kept = clean_features(idents, FEATURES.attributes)
    assert [i.text for i in kept.identifiers] == ["小波包", "陶瓷领域", "FGF21 lowers SREBP2"]
    with pytest.raises(OutputRejected, match="at least one identifier"):
        clean_features(idents[:1], FEATURES.attributes)


def test_blueprints_must_copy_identifiers_and_options_and_not_repeat():
    kept, problems = check_blueprints(
        [bp("fgf21", specificity="BROAD"), bp("FGF-21", specificity="broad"), bp("FGF21", specificity="narrow"),
         bp("FGF21", specificity="broad"), bp("FGF21 lowers SREBP2")],
        FEATURES,
    )
    assert [(b.identifier, b.choices[0].option) for b in kept] == [("FGF21", "broad")]  # canonical spelling
    joined = " | ".join(problems)
    assert "'FGF-21' is not in the list" in joined
    assert "'narrow' is not an option of 'specificity'" in joined
    assert "repeats an identifier-and-options combination" in joined
    assert "choose an option for specificity" in joined


def test_blueprints_already_used_count_as_repeats():
    kept, problems = check_blueprints([bp("FGF21", specificity="broad")], FEATURES,
                                      already=[bp("FGF21", specificity="broad")])
    assert kept == [] and "repeats" in problems[0]


def test_queries_one_per_blueprint_in_language_without_duplicates():
    bps = [bp("FGF21", specificity="broad"), bp("FGF21", specificity="specific")]
    assert check_queries([WrittenQuery(blueprint=1, query="beta"), WrittenQuery(blueprint=0, query=' "alpha" ')], bps,
                         language="en") == ["alpha", "beta"]
    with pytest.raises(OutputRejected, match="exactly 2"):
        check_queries([WrittenQuery(blueprint=0, query="alpha")], bps, language="en")
    with pytest.raises(OutputRejected, match="duplicates"):
        check_queries([WrittenQuery(blueprint=0, query="same"), WrittenQuery(blueprint=1, query="Same")], bps,
                      language="en")
    with pytest.raises(OutputRejected, match="English"):
        check_queries([WrittenQuery(blueprint=0, query="成纤维细胞生长因子"),
                       WrittenQuery(blueprint=1, query="ok")],
                      bps, language="en")


def test_language_check_handles_the_cross_language_case():
    assert check_language("Does FGF21 protect against atherosclerosis?", "en") is None
    assert check_language("成纤维细胞生长因子21能否预防动脉粥样硬化", "zh") is None
    assert check_language("FGF21 能否预防动脉粥样硬化", "zh") is None  # Latin names inside Chinese are fine
    assert "English" in check_language("成纤维细胞生长因子21能否预防", "en")
    assert "Chinese" in check_language("Does FGF21 protect?", "zh")
    # one untranslated word in an otherwise English query (a 1.5B writer's CSL query) is named, not let through
    problem = check_language("planned experiments of microbial bioactivity in low渗透 oil reservoirs", "en")
    assert problem == "keeps Chinese/Japanese characters ('渗透') untranslated"


def test_labels_every_candidate_exactly_once():
    labels = [CandidateLabel(doc_id=1, score=3), CandidateLabel(doc_id=0, score=0)]
    assert check_labels(labels, 2) == [0, 3]
    with pytest.raises(OutputRejected, match="missing doc_id 2"):
        check_labels(labels, 3)
    with pytest.raises(OutputRejected, match="more than once"):
        check_labels([*labels, CandidateLabel(doc_id=1, score=1)], 2)
    with pytest.raises(OutputRejected, match="was not shown"):
        check_labels([*labels, CandidateLabel(doc_id=5, score=1)], 2)


def test_blueprints_accept_numbered_identifier_references():
    kept, problems = check_blueprints([bp("2", specificity="broad"), bp("1. FGF21", specificity="specific")], FEATURES)
    assert [b.identifier for b in kept] == ["FGF21 lowers SREBP2", "FGF21"] and not problems


def test_queries_that_copy_the_document_are_rejected():
    doc = "Fibroblast growth factor 21 protects against atherosclerosis by modulating adiponectin and SREBP2 levels " \
          "in mice"
    bps = [bp("FGF21", specificity="broad")]
    copied = "fibroblast growth factor 21 protects against atherosclerosis by modulating adiponectin and SREBP2 levels"
    with pytest.raises(OutputRejected, match="copies a sentence"):
        check_queries([WrittenQuery(blueprint=0, query=copied)], bps, language="en", document=doc)
    assert check_queries([WrittenQuery(blueprint=0, query="FGF21 reduces plaque formation")], bps,
                         language="en", document=doc) == ["FGF21 reduces plaque formation"]


def test_a_single_candidate_takes_the_first_label_whatever_id_it_names():
    assert check_labels([CandidateLabel(doc_id=1, score=2)], 1) == [2]
    assert check_labels([CandidateLabel(doc_id=1, score=1), CandidateLabel(doc_id=2, score=3)], 1) == [1]
    with pytest.raises(OutputRejected):
        check_labels([], 1)


def test_labels_are_salvaged_from_a_truncated_looping_answer():
    from syntra_dspy.programs.synthesis import salvage_labels

    text = '{"judgements": [{"doc_id": 0, "score": 2}, {"doc_id": 1, "score": 0}, {"doc_id": 0, "score": 3}, {"doc_id'
    assert [(label.doc_id, label.score) for label in salvage_labels(text)] == [(0, 2), (1, 0)]


def test_a_step_retry_samples_instead_of_repeating_the_greedy_answer():
    """Greedy answers that loop are resampled (temperature, penalty) on the next try."""
    import dspy

    from syntra_dspy.programs.components import ComponentState
    from syntra_dspy.programs.synthesis import SynthesisProgram
    from syntra_dspy.task import TaskDefinition
    from syntra_dspy.testing import SyntraBrain, scripted_lm

    seen = []

    class LoopsWhenGreedy(SyntraBrain):
        def __call__(self, call):
            seen.append(dict(call.options))
            if "identifiers" in call.output_fields and not call.options.get("temperature"):
                return '{"identifiers": [{"kind": "entity", "text": "x"}, {"kind": "entity", "text": "x"'  # cut off
            return super().__call__(call)

    state = ComponentState(task_definition=TaskDefinition(query_type="claim", doc_type="abstract",
                                                          relevance_definition="relevant if it answers"))
    program = SynthesisProgram(state)
    with dspy.context(lm=scripted_lm(LoopsWhenGreedy()), adapter=dspy.JSONAdapter()):
        features = program.extract_features("Fibroblast growth factor lowers cholesterol in mice")
    assert features.identifiers
    assert seen[0].get("temperature") in (None, 0, 0.0) and seen[1]["temperature"] == 0.7
    assert seen[1]["frequency_penalty"] == 0.5


def test_blueprint_choice_with_a_missing_dimension_name_is_resolved_by_its_option():
    feats = clean_features([Identifier(kind="entity", text="FGF21")],
                           [AttributeDimension(dimension="specificity", options=["broad", "specific"]),
                            AttributeDimension(dimension="stance", options=["supporting", "refuting"])])
    choices = [AttributeChoice(dimension="", option="specific"),
               AttributeChoice(dimension="refuting", option="refuting")]
    kept, problems = check_blueprints([Blueprint(identifier="FGF21", choices=choices)], feats)
    assert not problems
    assert [(c.dimension, c.option) for c in kept[0].choices] == [("specificity", "specific"), ("stance", "refuting")]


def test_fallback_blueprints_follow_the_rules_without_repeats():
    from syntra_dspy.programs.validation import fallback_blueprints

    feats = clean_features([Identifier(kind="entity", text="IL-6"), Identifier(kind="entity", text="TNF")],
                           [AttributeDimension(dimension="d1", options=["x", "y"]),
                            AttributeDimension(dimension="d2", options=["p", "q", "r"])])
    bps = fallback_blueprints(feats, 5, seed=3)
    kept, problems = check_blueprints(bps, feats)
    assert len(kept) == 5 and not problems  # every one valid, no combination repeated


def test_fallback_blueprints_keep_the_planners_valid_ones_first_and_never_repeat_them():
    from syntra_dspy.programs.validation import fallback_blueprints

    feats = clean_features([Identifier(kind="entity", text="IL-6"), Identifier(kind="entity", text="TNF")],
                           [AttributeDimension(dimension="d1", options=["x", "y"])])
    planned = fallback_blueprints(feats, 1, seed=5)  # one the planner "got right"
    bps = fallback_blueprints(feats, 3, seed=5, kept=planned)
    assert bps[0] == planned[0] and len(bps) == 3
    assert len({bp.key() for bp in bps}) == 3 and not check_blueprints(bps, feats)[1]
    assert fallback_blueprints(feats, 1, kept=bps) == bps[:1]  # never more than asked


def test_a_copied_query_is_sent_to_its_rewrite_with_the_words_it_copied_and_a_length_that_cannot_hold_them():
    document = ("Background. Tenomodulin is a marker of tendon cells, and its expression in human adipocytes rises "
                "markedly during their differentiation in culture.")
    query = "Its Expression in Human Adipocytes rises markedly during their differentiation, say the authors."
    assert copied_run(query, document) == ["Its", "Expression", "in", "Human", "Adipocytes", "rises", "markedly",
                                           "during", "their", "differentiation"]
    assert copied_run("Nothing shared here.", document) == []
    note = copy_repair(query, document, 8)
    assert '"Its Expression in Human Adipocytes rises markedly during their differentiation"' in note
    assert "at most 8 words" in note
    long = copy_repair(document, document, 10)  # a whole copied passage is quoted only in part (12 words)
    assert '"Background Tenomodulin is a marker of tendon cells and its expression in ..."' in long
    with pytest.raises(QueriesRejected) as caught:
        check_queries([WrittenQuery(blueprint=0, query=query)], [bp("FGF21", specificity="broad")], language="en",
                      document=document, max_copied_words=8)
    assert caught.value.repairs == {0: (query, note)}


def test_a_compound_name_counts_as_one_copied_word_but_a_hyphen_does_not_hide_a_copied_sentence():
    from syntra_dspy.programs.validation import copied_words, query_problem

    compound = "1-(5-chloro-6-(trifluoromethoxy)-1H-benzoimidazol-2-yl)-1H-pyrazole-4-carboxylic acid (JNJ-42041935)"
    document = (f"{compound} is a potent and selective inhibitor of prolyl hydroxylase. Telomeric guanine-quadruplex "
                "DNA reacts with Stylonychia lemnae macronuclei in situ, as antibodies generated in vitro show.")
    named = f"The specificity of {compound} for prolyl hydroxylase exceeds that of earlier inhibitors."
    assert len(copied_run(named, document)) == 16  # pieces of the compound's three words: one name, not a sentence
    assert copied_words(named, document) == 3
    assert query_problem(named, language="en", document=document) is None
    rehyphenated = "Telomeric guanine quadruplex DNA reacts with Stylonychia lemnae macronuclei in situ, " \
                   "antibodies show."
    assert copied_words(rehyphenated, document) == 11
    assert query_problem(rehyphenated, language="en", document=document).kind == "copy"


def test_a_copy_notes_length_cap_never_contradicts_the_examples_form():
    from syntra_dspy.programs.validation import repair_note
    from syntra_dspy.query_form import QueryForm

    document = "Tenomodulin expression in human adipocytes rises markedly during their differentiation in culture."
    query = "Tenomodulin expression in human adipocytes rises markedly during their differentiation."
    long_claims = QueryForm.from_examples(["A claim " + "with many words " * 10 + "stated.",
                                           "Another claim " + "with many words " * 11 + "here."])
    assert long_claims.min_length > 10
    assert f"at most {long_claims.min_length} words" in repair_note("copy", query, document, 10, long_claims)
    chinese = QueryForm.from_examples(["枸杞多糖防治2型糖尿病的机制",
                                       "高压脉冲电场对酵母菌存活率的影响"])
    assert chinese.unit == "characters" and "at most" not in repair_note("copy", query, document, 10, chinese)
    assert "at most 10 words" in repair_note("copy", query, document, 10, None)
