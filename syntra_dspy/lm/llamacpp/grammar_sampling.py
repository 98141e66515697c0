"""Greedy decoding under a grammar that checks the chosen token first, and masks the vocabulary only when it must.

llama-cpp-python puts a JSON schema's grammar into the sampler chain ahead of the token choice, so for every
generated token llama.cpp tests all ~151,000 vocabulary entries of Qwen2.5 against the grammar: ~65 ms a token on
two cores, against ~95 ms for the 1.5B model itself (experiments/grammar_sampling/). Under greedy
decoding only one token can win. :class:`GrammarCheckedGreedy` picks it without the grammar, asks the grammar about
that one token, and only when the grammar refuses it (the model wanted to write prose or a markdown fence) masks
the whole vocabulary and picks again: the way llama.cpp's own command-line sampler works. The answer is the same
token for token (the best token the grammar allows is the best token when the grammar allows the best token), so
it applies to greedy requests only; a sampled request keeps llama-cpp-python's chain, whose distribution it is.

A request may also carry guards (:mod:`syntra_dspy.decoding_guards`: ``syntra produce --copy-guard N``,
``--question-guard``): a chosen token that would make a query repeat more than N consecutive words of its document,
or make it a question, is refused like one the grammar refuses, and the best token left is taken. That changes the
answer (on purpose); it acts on greedy requests under a grammar only, the ones this sampler decodes.

Nothing here imports llama_cpp at import time: the engine hands in the ``Llama`` class it loaded.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from syntra_dspy.decoding_guards import Guard

#: Tokens a guard may refuse in a row at one position before the last one is kept (the grammar's own choice).
MAX_STEERS = 64


class GrammarCheckedGreedy:
    """Stands in for llama-cpp-python's ``LlamaSampler`` while one greedy completion under a grammar runs.

    ``chain`` is llama-cpp-python's own chain for the request without the grammar (penalties, then greedy);
    ``grammar`` a llama.cpp grammar sampler. Counts the tokens the grammar let through as chosen
    (``checked``) and those it refused (``masked``: the whole vocabulary was masked for them). With ``guard`` (and
    ``piece``, a token's bytes), a token the guard refuses is passed over too (``steered`` counts them)."""

    def __init__(self, llama_cpp: Any, chain: Any, grammar: Any, n_vocab: int, *,
                 guard: Guard | None = None,
                 piece: Callable[[int], bytes] | None = None) -> None:
        self._lib = llama_cpp
        self._chain = chain  # a LlamaSampler: owns its native chain and frees it
        self._grammar = grammar  # a native llama_sampler pointer: freed in close()
        if guard is not None and piece is None:
            raise ValueError("a guard needs piece(token) -> bytes to read the tokens it judges")
        self._guard, self._piece = guard, piece
        self._n_vocab = n_vocab
        self._data = np.recarray((n_vocab,), dtype=np.dtype([("id", np.intc), ("logit", np.single),
                                                             ("p", np.single)], align=True))
        self._ids = np.arange(n_vocab, dtype=np.intc)
        self._all = llama_cpp.llama_token_data_array(
            data=self._data.ctypes.data_as(llama_cpp.llama_token_data_p), size=n_vocab, selected=-1, sorted=False)
        self._one_data = (llama_cpp.llama_token_data * 1)()
        self._one = llama_cpp.llama_token_data_array(data=self._one_data, size=1, selected=-1, sorted=False)
        self.checked = 0
        self.masked = 0
        self.steered = 0
        if guard is not None:
            guard.reset()

    def _fill(self, ctx: Any, idx: int) -> None:
        logits = np.ctypeslib.as_array(self._lib.llama_get_logits_ith(ctx.ctx, idx), shape=(self._n_vocab,))
        self._data.id[:] = self._ids
        self._data.logit[:] = logits
        self._data.p[:] = 0.0
        self._all.size, self._all.selected, self._all.sorted = self._n_vocab, -1, False

    def _pick(self) -> int:
        """Apply the chain (penalties, greedy) to the filled array and return the token it selects."""
        self._lib.llama_sampler_apply(self._chain.sampler, ctypes.byref(self._all))
        return int(self._data.id[self._all.selected])

    def _allowed(self, token: int) -> bool:
        self._one_data[0].id, self._one_data[0].logit, self._one_data[0].p = token, 0.0, 0.0
        self._one.size, self._one.selected, self._one.sorted = 1, -1, False
        self._lib.llama_sampler_apply(self._grammar, ctypes.byref(self._one))
        return bool(np.isfinite(self._one_data[0].logit))

    def _refused(self, token: int) -> bool:
        return self._guard is not None and self._guard.refuses(self._piece(token))  # type: ignore[misc]

    def sample(self, ctx: Any, idx: int = -1) -> int:
        """The token a greedy chain with the grammar in it would choose at logits row ``idx``; accepted by both.
        With a guard: the best such token the guard does not refuse."""
        self._fill(ctx, idx)
        token = self._pick()
        allowed = self._allowed(token)
        if allowed and not self._refused(token):
            self.checked += 1
        else:
            self.masked += not allowed
            self._fill(ctx, idx)
            self._lib.llama_sampler_apply(self._grammar, ctypes.byref(self._all))
            token = self._pick()
            for _ in range(MAX_STEERS):  # the chain's logits are in the array now: the next best is its argmax
                if not self._refused(token):
                    break
                self.steered += 1
                self._data.logit[self._all.selected] = -np.inf
                best = int(np.argmax(self._data.logit))
                if not np.isfinite(self._data.logit[best]):
                    break  # the grammar allows nothing else: keep the refused token (the check catches it later)
                self._all.selected = best
                token = int(self._data.id[best])
        self.accept(token)
        return token

    def accept(self, token: int) -> None:
        self._lib.llama_sampler_accept(self._grammar, token)
        self._chain.accept(token)
        if self._guard is not None:
            self._guard.accept(self._piece(token))  # type: ignore[misc]

    def reset(self) -> None:
        self._lib.llama_sampler_reset(self._grammar)
        self._chain.reset()
        if self._guard is not None:
            self._guard.reset()

    def close(self) -> None:
        if self._grammar is not None:
            self._lib.llama_sampler_free(self._grammar)
            self._grammar = None
        self._chain.close()

    def __del__(self) -> None:
        self.close()


def grammar_checked(llama_class: type) -> type:
    """A subclass of ``llama_class`` (``llama_cpp.Llama``) whose greedy completions under a grammar use
    :class:`GrammarCheckedGreedy`; ``check_grammar_first = False`` on an instance gives llama-cpp-python's chain
    (the engine sets it per call), as does ``guard`` (:mod:`syntra_dspy.decoding_guards`, or None).
    ``last_sampler`` is the latest such sampler, for its counts."""
    import llama_cpp

    class GrammarCheckedLlama(llama_class):
        check_grammar_first = True
        guard: Guard | None = None
        last_sampler: GrammarCheckedGreedy | None = None

        def _init_sampler(self, *args: Any, **kwargs: Any) -> Any:
            grammar = kwargs.get("grammar")
            greedy = kwargs.get("temp", 0.8) == 0.0 and not args
            if grammar is None or not greedy or not self.check_grammar_first or kwargs.get("logits_processor"):
                return super()._init_sampler(*args, **kwargs)
            chain = super()._init_sampler(*args, **{**kwargs, "grammar": None})
            native = llama_cpp.llama_sampler_init_grammar(
                self._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8"))
            if not native:
                chain.close()
                raise ValueError("llama.cpp could not parse the grammar made from the response schema")
            self.last_sampler = GrammarCheckedGreedy(llama_cpp, chain, native, self._n_vocab, guard=self.guard,
                                                     piece=lambda token: self.detokenize([token]))
            return self.last_sampler

    GrammarCheckedLlama.__name__ = GrammarCheckedLlama.__qualname__ = f"GrammarChecked{llama_class.__name__}"
    return GrammarCheckedLlama
