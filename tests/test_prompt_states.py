"""The saved-prompt-state cache: one state per prompt family, longest shared prefix restored, bounded memory."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from syntra_dspy.lm.llamacpp.prompt_states import PromptStateCache, shared_prefix


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
    """Just enough of ``llama_cpp.Llama``'s generation: reuse the context's shared prefix, evaluate the rest of the
    prompt in one ``eval``, then one ``eval`` per generated token."""

    def __init__(self) -> None:
        self.context: list[int] = []
        self.evals: list[int] = []

    def eval(self, tokens) -> None:
        self.evals.append(len(tokens))
        self.context.extend(tokens)

    def generate(self, tokens, **kwargs):
        del self.context[shared_prefix(self.context, tokens):]
        pending = list(tokens[len(self.context):])
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
    assert llama.prompt_tokens_evaluated == 2  # the grading instruction was reused
