"""Greedy decoding with the grammar checked on the chosen token must pick what masking the vocabulary would pick.

The native calls are replaced by a stand-in whose "grammar" allows a different token set at each step, so the
check's two paths (chosen token allowed; refused, then the vocabulary masked) run on known logits. The same property
with the real model and a real JSON grammar: tests/test_lm_embedded.py (marked llm).
"""

from __future__ import annotations

import ctypes
import math
from types import SimpleNamespace

import numpy as np
import pytest

llama_cpp = pytest.importorskip("llama_cpp")

from syntra_dspy.lm.llamacpp.grammar_sampling import GrammarCheckedGreedy


class FakeNative:
    """The few llama.cpp calls the sampler makes: logits rows, a greedy chain, a grammar with per-step token sets."""

    def __init__(self, logits: np.ndarray, allowed: list[set[int]]) -> None:
        self.logits = np.ascontiguousarray(logits, dtype=np.single)
        self.allowed = allowed
        self.step = 0
        self.grammar_accepted: list[int] = []
        self.vocab_masks = 0  # grammar applications to more than one candidate
        self.llama_token_data = llama_cpp.llama_token_data
        self.llama_token_data_p = llama_cpp.llama_token_data_p
        self.llama_token_data_array = llama_cpp.llama_token_data_array

    def llama_get_logits_ith(self, ctx, idx):
        return self.logits[self.step].ctypes.data_as(ctypes.POINTER(ctypes.c_float))

    def llama_sampler_apply(self, sampler, ref):
        arr = ref._obj
        items = [arr.data[i] for i in range(arr.size)]
        if sampler == "grammar":
            self.vocab_masks += arr.size > 1
            for item in items:
                if item.id not in self.allowed[self.step]:
                    item.logit = -math.inf
        else:  # the chain: greedy, the first best on ties, as llama.cpp's greedy sampler
            arr.selected = max(range(arr.size), key=lambda i: (items[i].logit, -i))

    def llama_sampler_accept(self, sampler, token):
        assert sampler == "grammar"
        self.grammar_accepted.append(token)
        self.step += 1

    def llama_sampler_reset(self, sampler):
        self.step = 0

    def llama_sampler_free(self, sampler):
        pass


class FakeChain:
    sampler = "chain"

    def __init__(self) -> None:
        self.accepted: list[int] = []

    def accept(self, token: int) -> None:
        self.accepted.append(token)

    def reset(self) -> None:
        self.accepted.clear()

    def close(self) -> None:
        pass


def test_the_checked_token_is_the_best_token_the_grammar_allows_on_both_paths():
    rng = np.random.default_rng(0)
    vocab, steps = 50, 40
    logits = rng.normal(size=(steps, vocab))
    allowed = []
    for step in range(steps):
        if step % 3 == 0:  # the model's favourite refused: the vocabulary must be masked
            best = int(np.argmax(logits[step]))
            allowed.append(set(rng.choice([t for t in range(vocab) if t != best], size=5, replace=False).tolist()))
        else:
            allowed.append(set(range(vocab)) - set(rng.choice(vocab, size=10, replace=False).tolist()))
    native = FakeNative(logits, allowed)
    chain = FakeChain()
    sampler = GrammarCheckedGreedy(native, chain, "grammar", vocab)
    ctx = SimpleNamespace(ctx=None)

    chosen = [sampler.sample(ctx, -1) for _ in range(steps)]

    want = [max(allowed[s], key=lambda t: logits[s][t]) for s in range(steps)]
    assert chosen == want
    assert native.grammar_accepted == chosen and chain.accepted == chosen
    refused = sum(int(np.argmax(logits[s])) not in allowed[s] for s in range(steps))
    assert refused >= steps // 3
    assert sampler.masked == native.vocab_masks == refused
    assert sampler.checked == steps - refused


def test_ties_keep_the_first_best_token_as_the_masked_vocabulary_does():
    logits = np.zeros((1, 6))
    logits[0, [1, 4]] = 2.0  # token 1 and token 4 tie for best
    native = FakeNative(logits, [{4, 5}])
    sampler = GrammarCheckedGreedy(native, FakeChain(), "grammar", 6)

    assert sampler.sample(SimpleNamespace(ctx=None), -1) == 4
    assert sampler.masked == 1


def test_a_copy_guard_passes_over_the_token_that_would_copy_and_takes_the_best_the_grammar_allows():
    """The model wants to go on copying its document; the guard refuses the word that would pass the limit, and
    the sampler takes the best other token that the grammar also allows (never one the grammar refuses)."""
    from syntra_dspy.copying import CopyGuard, longest_copy

    document = "one two three four five six"
    vocab = ['{"q": "', "one", " two", " three", " four", " five", " six", " seven", " eight", '"}']
    steps = 6
    logits = np.full((steps, len(vocab)), -5.0)
    for step, favourite in enumerate([0, 1, 2, 3, 4, 9]):  # the writer copies four words, then closes
        logits[step, favourite] = 5.0
    logits[3, 7], logits[3, 8] = 4.0, 3.0  # at the third word: " seven" is second best, " eight" third
    allowed = [set(range(len(vocab)))] * steps
    allowed = [*allowed[:3], set(range(len(vocab))) - {7}, *allowed[4:]]  # ... but the grammar refuses " seven"
    native = FakeNative(logits, allowed)
    guard = CopyGuard(document, max_words=2)
    sampler = GrammarCheckedGreedy(native, FakeChain(), "grammar", len(vocab), guard=guard,
                                   piece=lambda token: vocab[token].encode())

    chosen = [sampler.sample(SimpleNamespace(ctx=None), -1) for _ in range(steps)]

    text = "".join(vocab[t] for t in chosen)
    assert chosen[:4] == [0, 1, 2, 8]  # " three" would be a third copied word; " seven" is refused by the grammar
    assert sampler.steered >= 1 and longest_copy(text[len('{"q": "'):-2], document)[1] <= 2
    assert native.grammar_accepted == chosen  # the grammar heard every token taken, and only those


def test_a_copy_guard_needs_to_read_tokens():
    with pytest.raises(ValueError, match="piece"):
        from syntra_dspy.copying import CopyGuard

        GrammarCheckedGreedy(FakeNative(np.zeros((1, 2)), [{0, 1}]), FakeChain(), "grammar", 2, guard=CopyGuard("x"))
