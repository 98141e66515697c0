"""The saved-prompt-state cache: one state per prompt family, longest shared prefix restored, bounded memory."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest

from syntra_dspy.lm.llamacpp.prompt_states import PromptStateCache, reuse_end, shared_prefix


@dataclass
class State:  # the fields of llama_cpp.LlamaState the cache reads
    input_ids: np.ndarray
    llama_state_size: int


def state(tokens: list[int], size: int = 100) -> State:
    return State(np.array(tokens, dtype=np.intc), size)


EXTRACT = list(range(1000, 1300))  # a step's fixed instruction: 300 tokens
GRADE = list(range(5000, 5200))


def prompt(prefix: list[int], doc: int) -> list[int]:
    return [*prefix, *range(doc * 100, doc * 100 + 50)]


def test_shared_prefix_counts_leading_equal_tokens():
    assert shared_prefix([1, 2, 3, 4], [1, 2, 9]) == 2
    assert shared_prefix([1, 2], [1, 2, 3]) == 2
    assert shared_prefix([], [1]) == 0
    assert shared_prefix([7], [8]) == 0


def test_a_steps_newer_call_replaces_its_older_state_and_keeps_the_other_steps():
    cache = PromptStateCache(same_family=128)
    cache[prompt(EXTRACT, 1)] = state(prompt(EXTRACT, 1))
    for doc in range(1, 17):  # sixteen grading calls in a row, as one document makes
        cache[prompt(GRADE, doc)] = state(prompt(GRADE, doc))
    assert len(cache) == 2  # the latest grading state and the extract state: sixteen calls did not flush it
    restored = cache[prompt(EXTRACT, 2)]  # the next document's extract call finds its instruction
    assert shared_prefix(restored.input_ids.tolist(), prompt(EXTRACT, 2)) == len(EXTRACT)
    assert cache.hits == 1


def test_a_prompt_sharing_less_than_a_family_prefix_finds_no_state():
    cache = PromptStateCache(same_family=128)
    cache[prompt(EXTRACT, 1)] = state(prompt(EXTRACT, 1))
    with pytest.raises(KeyError):
        cache[[*EXTRACT[:40], 1, 2, 3]]  # a chat-template opening in common is not worth a restore
    assert [*EXTRACT[:40], 1] not in cache and cache.misses == 1
    cache[[*EXTRACT[:40], 7, 8, 9]] = state([*EXTRACT[:40], 7, 8, 9])
    assert len(cache) == 2  # nor does it count as the same step


def test_the_longest_shared_prefix_wins():
    cache = PromptStateCache(same_family=10)
    short, long = [*EXTRACT[:150], 1, 2], [*EXTRACT[:250], 3, 4]
    cache.same_family = 1000  # store both as separate families
    cache[short] = state(short)
    cache[long] = state(long)
    cache.same_family = 10
    assert cache[[*EXTRACT, 5]].input_ids.tolist() == long


def test_the_least_recently_used_states_go_first_beyond_the_capacity():
    cache = PromptStateCache(capacity_bytes=250, same_family=128)
    families = [list(range(k * 10_000, k * 10_000 + 200)) for k in range(4)]
    for fam in families[:2]:
        cache[fam] = state(fam, size=100)
    cache[[*families[0], 1]]  # family 0 used again: family 1 is now the oldest
    cache[families[2]] = state(families[2], size=100)
    assert len(cache) == 2 and cache.cache_size == 200
    assert [*families[0], 1] in cache and [*families[1], 1] not in cache


class Generating:
    """Just enough of ``llama_cpp.Llama``'s generation: reuse the context's shared prefix (one token short of the
    whole prompt), evaluate the rest of the prompt in one ``eval``, then one ``eval`` per generated token."""

    def __init__(self) -> None:
        self.input_ids = np.zeros(4096, dtype=np.intc)
        self.n_tokens = 0
        self.evals: list[int] = []
        self.removed_from: list[int] = []
        self._ctx = SimpleNamespace(kv_cache_seq_rm=lambda seq, start, end: self.removed_from.append(start) or True)

    def reset(self) -> None:
        self.n_tokens = 0

    def eval(self, tokens) -> None:
        self.evals.append(len(tokens))
        self.input_ids[self.n_tokens:self.n_tokens + len(tokens)] = tokens
        self.n_tokens += len(tokens)

    def generate(self, tokens, reset: bool = True, **kwargs):
        if reset:
            self.n_tokens = min(shared_prefix(self.input_ids[:self.n_tokens].tolist(), tokens), len(tokens) - 1)
        pending = list(tokens[self.n_tokens:])
        while True:
            self.eval(pending)
            yield 7
            pending = [7]


def test_a_generation_counts_the_prompt_tokens_it_evaluated_not_the_ones_it_reused():
    from itertools import islice

    from syntra_dspy.lm.llamacpp.prompt_states import stateful

    llama = stateful(Generating)()
    assert llama.prompt_tokens_evaluated is None
    assert list(islice(llama.generate([*GRADE, 1, 2, 3]), 4)) == [7] * 4
    assert llama.prompt_tokens_evaluated == 203  # a fresh context: the whole prompt
    assert llama.evals == [203, 1, 1, 1]  # the generated tokens do not count
    list(islice(llama.generate([*GRADE, 9, 9]), 2))
    # the grading instruction was reused up to the grid line before the prompt's last whole group (reuse_end)
    assert llama.prompt_tokens_evaluated == 202 - 192 == 10


@pytest.mark.parametrize(("shared", "prompt", "reusable", "end"), [
    (281, 289, 288, 280),  # another claim about the same document: up to the grid line before the divergence
    (289, 289, 288, 280),  # the same prompt again: its last whole group and its rest are evaluated again
    (100, 289, 288, 96),  # a shared instruction ending off the grid
    (281, 289, 200, 200),  # the context's own prompt ended earlier: its rest and its answer are not reused
    (289, 289, 0, 0),  # a context not evaluated on the grid (a state saved before the rule): nothing reused
    (9, 9, 8, 0),  # a prompt of one whole group or less is evaluated whole
])
def test_a_reused_prefix_ends_on_the_grid_and_leaves_a_whole_group_to_evaluate(shared, prompt, reusable, end):
    assert reuse_end(shared, prompt, reusable, align=8) == end


def test_a_generation_never_reuses_its_answer_or_the_rest_of_its_prompt():
    """Tokens evaluated alone (an answer's, or a prompt's last ones after its last whole group) went through another
    kernel than in a cold evaluation: a later prompt re-evaluates them, from the grid line before them."""
    from itertools import islice

    from syntra_dspy.lm.llamacpp.prompt_states import stateful

    llama = stateful(Generating)()
    first = [*GRADE, 1, 2, 3]  # 203 tokens: 200 on the grid
    list(islice(llama.generate(first), 4))  # the context: the prompt and three answer tokens
    assert llama.reusable == 200
    list(islice(llama.generate([*first, 7, 7, 7, 5]), 1))  # shares the prompt and the answer: 206 tokens
    assert llama.removed_from[-1] == 192 and llama.prompt_tokens_evaluated == 207 - 192
    assert llama.reusable == 200
    llama.reset()
    assert llama.reusable == 0
    list(islice(llama.generate(first), 1))
    assert llama.prompt_tokens_evaluated == 203  # nothing left to reuse


_INSTRUCTION = "Grade how well the document supports the claim, from 0 to 3, and answer with the digit only. " * 3
_ABSTRACT = ("Document: Background. Fever is a common reason for visits to paediatric emergency departments. We "
             "compared the time to defervescence after a single dose of ibuprofen or paracetamol in 240 children aged "
             "six months to six years with a temperature above 38.5 degrees. Ibuprofen lowered the temperature faster "
             "in the first two hours, and the difference was largest in children under two years. Adverse events were "
             "rare and similar in both groups. Conclusion: a single dose of ibuprofen reduces fever faster than "
             "paracetamol, and both are well tolerated.")


@pytest.mark.llm
def test_real_engine_gives_a_prompt_the_logits_of_its_cold_evaluation_whatever_ran_before(small_generator):
    """Before the grid (reuse_end), the same prompt asked again had its last token evaluated alone, and its logits
    moved by up to 0.3 on this model: a grade, or a near tie in a greedy answer, then depended on the call before."""
    llama = small_generator.engine.load().llama

    def logits(prompt: str) -> np.ndarray:
        llama.create_completion(prompt, max_tokens=1, temperature=0.0)
        return np.array(np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(llama._n_vocab,)), copy=True)

    asked = f"{_INSTRUCTION}\n{_ABSTRACT}\nClaim: ibuprofen lowers fever faster than paracetamol.\nGrade:"
    other_claim = f"{_INSTRUCTION}\n{_ABSTRACT}\nClaim: paracetamol upsets the stomach less.\nGrade:"
    other_document = f"{_INSTRUCTION}\nDocument: Aspirin in stroke.\nClaim: a claim.\nGrade:"
    llama.reset()
    llama.cache = PromptStateCache()
    cold = logits(asked)
    for before in ([], [other_claim], [other_document], [other_claim, other_document, other_claim]):
        for prompt in before:
            logits(prompt)
        again = logits(asked)
        assert llama.prompt_tokens_evaluated < len(llama.tokenize(asked.encode()))  # a prefix was reused
        assert np.array_equal(again, cold), (len(before), float(np.abs(again - cold).max()))
