"""Saved llama.cpp states of recent prompts, so each step's fixed instruction is evaluated once, not once per call.

llama.cpp reuses the cached prefix of the *previous* prompt only. A production document runs five different steps
(extract, plan, write, grade, ...) one after another, so every step finds the context filled by another step and
evaluates its own instruction, field list and examples again: 740 of the extract step's ~1,000 prompt tokens and
940 of the planner's ~1,280 are the same for every document. On two cores that is ~10 s of prompt evaluation per
step and document, together a quarter of a document's time (experiments/prompt_states/).
:class:`PromptStateCache` keeps the state after the latest call of each prompt family (prompts that share a long
prefix: the calls of one step), and llama-cpp-python restores the one sharing most of the next prompt before
evaluating the rest.

Reusing a prefix must not change the answer. llama.cpp's CPU kernels compute a token the same way in any batch
that holds it in a whole group of rows, but a token evaluated alone, or left over after the last whole group, goes
through another kernel, whose logits differ (a logit by up to 0.35 on the 0.5B model). llama-cpp-python evaluates
a fully cached prompt's last token alone and a partly cached one from wherever the match ends, so the same
prompt decoded after another call could give another greedy answer (9 of 10 identical extraction prompts in
``benchmarks/results/paired_produce/scifact-embedded-8/``). :func:`reuse_end` keeps every evaluation on the same
``ALIGN``-token grid whatever the context holds, so a prompt's logits are those of its cold evaluation, bit for bit.

Nothing here imports llama_cpp at import time: the engine hands in the ``Llama`` class it loaded.
"""

from __future__ import annotations

import ctypes
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

# Two prompts of the same step share their instruction (hundreds of tokens); two different steps share the chat
# template's opening and DSPy's "Your input fields are:" line (under 40 tokens measured). Above this many shared
# leading tokens a new state replaces the kept one: it is the same step's newer call.
SAME_FAMILY_TOKENS = 128
DEFAULT_CAPACITY_BYTES = 1 << 30  # ~30 states of 1,300 tokens for the 1.5B model (28 KiB of KV per token)
#: The grid prompt evaluation keeps to: a reused prefix ends on a multiple of it and the evaluated rest holds at least
#: one whole group, so each prompt token meets the same kernel as in a cold evaluation. The x86 builds measured group
#: rows by 4 (the logits of a prompt split after 96, 100 or 128 tokens are identical, after 1-3, 5, 7 or 9 they are
#: not); 8 leaves room for a build that groups by 8, for at most 7 more tokens evaluated where a prefix is reused.
ALIGN = 8


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens two sequences have in common."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    x, y = np.asarray(a[:n]), np.asarray(b[:n])
    differ = np.flatnonzero(x != y)
    return int(differ[0]) if differ.size else n


def grid_floor(tokens: int, align: int = ALIGN) -> int:
    """The grid line at or before ``tokens``: how many of them fill whole groups of ``align``."""
    return tokens - tokens % align


def reuse_end(shared: int, prompt: int, reusable: int, align: int = ALIGN) -> int:
    """How many leading tokens of a ``prompt``-token prompt to keep from the context, which shares ``shared`` of
    them and holds ``reusable`` tokens evaluated on the grid (a prompt's whole groups, not its rest nor an answer):
    a multiple of ``align`` that leaves at least one whole group of the prompt to evaluate. 0: evaluate it all."""
    return max(0, grid_floor(min(shared, reusable, grid_floor(prompt, align) - align), align))


class PromptStateCache:
    """One saved state per prompt family; what llama-cpp-python's ``Llama.cache`` is asked (``cache[tokens]``, the
    saved state sharing most leading tokens, and ``cache[tokens] = state``).

    A state stored for a token sequence replaces every kept state sharing at least ``same_family`` leading tokens with
    it (an older call of the same step), so the cache holds the latest call of each step instead of the last N calls,
    which one document's sixteen grading calls would otherwise flush. When the states exceed ``capacity_bytes`` the
    least recently used go first. Thread-safe; lookups cost a vectorised prefix comparison per kept state.
    """

    def __init__(self, capacity_bytes: int = DEFAULT_CAPACITY_BYTES, *, same_family: int = SAME_FAMILY_TOKENS) -> None:
        self.capacity_bytes = capacity_bytes
        self.same_family = same_family
        self._states: OrderedDict[tuple[int, ...], Any] = OrderedDict()  # tokens -> llama_cpp.LlamaState
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def cache_size(self) -> int:
        with self._lock:
            return sum(state.llama_state_size for state in self._states.values())

    def __len__(self) -> int:
        return len(self._states)

    def __bool__(self) -> bool:  # llama-cpp-python asks ``if self.cache:``; an empty cache must still be used
        return True

    def _longest(self, key: Sequence[int]) -> tuple[tuple[int, ...] | None, int]:
        best, best_len = None, 0
        for kept in self._states:
            n = shared_prefix(kept, key)
            if n > best_len:
                best, best_len = kept, n
        return best, best_len

    def __getitem__(self, key: Sequence[int]) -> Any:
        with self._lock:
            best, n = self._longest(tuple(key))
            if best is None or n < self.same_family:
                self.misses += 1
                raise KeyError("no saved state shares this prompt's prefix")
            self._states.move_to_end(best)
            self.hits += 1
            return self._states[best]

    def __contains__(self, key: Sequence[int]) -> bool:
        with self._lock:
            return self._longest(tuple(key))[1] >= self.same_family

    def __setitem__(self, key: Sequence[int], value: Any) -> None:
        key = tuple(key)
        with self._lock:
            for kept in [k for k in self._states if shared_prefix(k, key) >= self.same_family]:
                del self._states[kept]
            self._states[key] = value
            size = sum(state.llama_state_size for state in self._states.values())
            while size > self.capacity_bytes and len(self._states) > 1:
                _, dropped = self._states.popitem(last=False)
                size -= dropped.llama_state_size


def stateful(llama_class: type) -> type:
    """A subclass of ``llama_class`` (``llama_cpp.Llama``) whose saved states hold the KV cache and tokens only.

    llama-cpp-python's own ``save_state`` copies ``scores`` too: with ``logits_all=False`` that is n_batch x vocabulary
    floats (311 MB for Qwen2.5) per call, unused, since sampling reads the context's logits and a restored prompt
    always evaluates at least its last whole group of tokens again (:func:`reuse_end`). With ``logits_all=True`` the
    stored scores are what logprobs read, so those states stay whole.

    ``prompt_tokens_evaluated`` says how much of the latest prompt was evaluated; the rest came from the context or a
    saved state, which the engine reports as cached prompt tokens (``export --stats`` shows the share per step).
    A prompt reuses only what :func:`reuse_end` allows (``reusable`` travels with a saved state), so its logits do not
    depend on what ran before.
    """

    class StatefulLlama(llama_class):
        states_restored = 0  # how often a saved state replaced the context (llama-cpp-python only loads one that
        # shares more of the prompt than the context already holds)
        prompt_tokens_evaluated: int | None = None  # the latest generation's prompt tokens that were not reused
        reusable = 0  # leading context tokens evaluated on the grid: the latest prompt's whole groups
        _grid = 0  # the whole groups of the prompt being generated from, until its evaluation starts

        def generate(self, tokens, *args, **kwargs):
            """Reuse only a grid-aligned prefix of the context (:func:`reuse_end`), then count what the generation
            evaluates of its prompt: its first ``eval`` is the part of the prompt that neither the live context nor a
            restored state held (the engine reports the rest as cached tokens)."""
            self.prompt_tokens_evaluated = None
            tokens = list(tokens)
            if kwargs.get("reset", True) and self.n_tokens > 0:
                shared = shared_prefix(self.input_ids[: self.n_tokens].tolist(), tokens)
                keep = reuse_end(shared, len(tokens), self.reusable)
                if keep < self.n_tokens:  # llama-cpp-python then reuses exactly ``keep`` tokens
                    if keep == 0 or not self._ctx.kv_cache_seq_rm(-1, keep, -1):
                        self.reset()
                    else:
                        self.n_tokens = keep
            self._grid = grid_floor(len(tokens))
            return (yield from super().generate(tokens, *args, **kwargs))

        def reset(self) -> None:
            self.reusable = 0
            return super().reset()

        def eval(self, tokens) -> None:
            if self.prompt_tokens_evaluated is None:
                # the prompt: from where the reused prefix ends (a grid line), in n_batch chunks (a multiple of it)
                self.prompt_tokens_evaluated = len(tokens)
                self.reusable, self._grid = self._grid, 0
            return super().eval(tokens)

        def save_state(self):
            import llama_cpp

            if self._logits_all:
                state = super().save_state()
                state.reusable = self.reusable
                return state
            size = llama_cpp.llama_state_get_size(self._ctx.ctx)
            buffer = (ctypes.c_uint8 * int(size))()
            written = int(llama_cpp.llama_state_get_data(self._ctx.ctx, buffer, size))
            if written > int(size):
                raise RuntimeError("llama.cpp wrote more state than it announced")
            state = llama_cpp.LlamaState(
                input_ids=self.input_ids.copy(), scores=np.empty((0, self._n_vocab), dtype=np.single),
                n_tokens=self.n_tokens, llama_state=bytes(memoryview(buffer)[:written]), llama_state_size=written,
                seed=self._seed)
            state.reusable = self.reusable
            return state

        def load_state(self, state) -> None:
            import llama_cpp

            if self._logits_all:
                super().load_state(state)
                self.reusable = getattr(state, "reusable", 0)
                return None
            data = (ctypes.c_uint8 * state.llama_state_size).from_buffer_copy(state.llama_state)
            if llama_cpp.llama_state_set_data(self._ctx.ctx, data, state.llama_state_size) != state.llama_state_size:
                raise RuntimeError("llama.cpp could not restore a saved prompt state")
            self.input_ids = state.input_ids.copy()
            self.n_tokens = state.n_tokens
            self._requires_eval = True
            self._seed = state.seed
            self.reusable = getattr(state, "reusable", 0)  # a state saved before this rule: reuse nothing of it
            self.states_restored += 1
            return None

    StatefulLlama.__qualname__ = StatefulLlama.__name__ = f"Stateful{llama_class.__name__}"
    return StatefulLlama
