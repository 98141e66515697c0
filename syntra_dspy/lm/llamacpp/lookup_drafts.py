"""Prompt-lookup drafts: tokens an answer copies from its prompt are checked a few at a time, not one by one.

The embedded model's answers repeat what they were shown: an extraction lists the document's own terms, a plan
copies those terms and the attribute options, and every JSON answer repeats its keys. Each generated token costs one
forward pass of the model, yet a pass over a few tokens costs little more than a pass over one on a CPU (the weights
are read once for all of them). So after each chosen token the engine looks up the last tokens in what came before
(llama-cpp-python's ``LlamaPromptLookupDecoding``: the first earlier occurrence of the last two tokens, or of the
last one) and evaluates the tokens that followed there as a draft, together with the chosen token, in one pass. The
sampler then chooses each next token from the logits at the draft positions as it would have without a draft,
keeps drafted tokens while they are the ones it chose, and drops the rest at the first difference.

It is off by default (``LlamaCppEngine(draft_tokens=0)``), because on the two-core CPUs measured it did not pay:
with the 1.5B model on production's own calls (experiments/lookup_drafts/) the extraction, which copies long
document terms, took 0.67x the time (2.4 tokens a pass), but plans, queries and sampled retries took 0.97-1.1x, and
all 9 calls together 0.82x with p 0.57. A pass over five tokens costs about twice a pass over one here, not "little
more". Nor is the answer always the token-by-token one: llama.cpp computes a batch's logits with other kernels than a
single token's (up to 0.5 apart measured with the 0.5B on this CPU build), so where two tokens are nearly tied the
choice can differ (4 of the 9 production calls wrote another text, as valid). Where a pass over several tokens is
cheap (more cores, a GPU build of llama.cpp) ``draft_tokens=4`` is worth measuring with the same benchmark.

llama-cpp-python implements the loop (``Llama.generate`` with a ``draft_model``) but asks llama.cpp for the logits of
every prompt token too (``logits_all``), which doubles the cost of a prompt and keeps a context-sized logits copy;
:func:`lookup_drafts` asks for them only where the sampler reads them (the chosen token and its draft).

Nothing here imports llama_cpp at import time: the engine hands in the ``Llama`` class it loaded.
"""

from __future__ import annotations

from typing import Any

#: Tokens looked up after each chosen token; 0 (the default) turns drafting off: on two cores it did not pay
#: (experiments/lookup_drafts/).
DEFAULT_DRAFT_TOKENS = 0
#: The longest run of last tokens searched for in the context (llama-cpp-python falls back to shorter runs).
NGRAM = 2


def lookup_drafts(llama_class: type) -> type:
    """A subclass of ``llama_class`` (a ``llama_cpp.Llama`` made :func:`~.prompt_states.stateful`,
    whose ``prompt_tokens_evaluated`` tells the prompt's evaluation from a draft's) that drafts up to
    ``draft_tokens`` tokens per pass by prompt lookup while ``draft_tokens > 0`` (the engine sets it per call);
    ``passes`` and ``drafted`` count the latest generation's forward passes after its prompt and the draft tokens
    evaluated in them."""

    class DraftingLlama(llama_class):
        draft_tokens = 0
        passes = 0
        drafted = 0

        def generate(self, tokens, *args: Any, **kwargs: Any):
            self.passes = self.drafted = 0
            if self.draft_tokens <= 0 or self._logits_all:
                return (yield from super().generate(tokens, *args, **kwargs))
            from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

            self.draft_model = LlamaPromptLookupDecoding(max_ngram_size=NGRAM, num_pred_tokens=self.draft_tokens)
            try:
                return (yield from super().generate(tokens, *args, **kwargs))
            finally:
                self.draft_model = None

        def eval(self, tokens) -> None:
            if self.draft_model is None or self.prompt_tokens_evaluated is None:
                # a generation without drafts, or its prompt (only the last token's logits are read)
                return super().eval(tokens)
            self.passes += 1
            self.drafted += max(0, len(tokens) - 1)
            if len(tokens) <= 1:
                return super().eval(tokens)
            # The chosen token and its draft: the sampler reads the logits at every one of these positions.
            n_past = self.n_tokens
            self._ctx.kv_cache_seq_rm(-1, n_past, -1)
            self._batch.set_batch(batch=tokens, n_past=n_past, logits_all=True)
            self._ctx.decode(self._batch)
            self.input_ids[n_past:n_past + len(tokens)] = tokens
            self.n_tokens = n_past + len(tokens)
            self._requires_eval = False
            return None

    DraftingLlama.__qualname__ = DraftingLlama.__name__ = f"Drafting{llama_class.__name__}"
    return DraftingLlama
