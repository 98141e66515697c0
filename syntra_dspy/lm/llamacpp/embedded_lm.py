"""The embedded engine's ``dspy.LM``: DSPy's response cache keyed on the engine build that answers.

DSPy's cache key is the request (model name, messages, settings), not the engine behind it. The embedded model's
name pins one GGUF file, but not the build of llama.cpp that runs it (portable, avx512, ...:
:mod:`.variants`), and two builds can answer one prompt differently: their kernels round differently, so a grade
near a cut or a near-tied token can go the other way (issue 42's measurements: 11 of 936 judge labels). Without the
build in the key, a run on one build was answered from another build's cache: a judge-agreement run with
``SYNTRA_LLAMA_VARIANT=amx`` read all 463 of its grades, in one second, from the cache an avx512 run had filled. So the
:class:`EmbeddedLM` adds the build to every request it sends (``metadata={"engine_build": NAME}``, which the engine
checks and drops), resolving it at its first call, where the engine is loaded anyway: building the LM loads nothing.
"""

from __future__ import annotations

from typing import Any

import dspy

from syntra_dspy.lm.llamacpp.engine import ENGINE_BUILD, METADATA


class EmbeddedLM(dspy.LM):
    """A ``dspy.LM`` over a :class:`~.engine.LlamaCppEngine` whose cached answers are keyed on the engine build.

    Only the public calls are wrapped (every DSPy module calls the LM so): a subclass that overrides ``forward`` is
    run by DSPy as a legacy LM, on another path."""

    def _name_build(self) -> None:
        if self.cache and METADATA not in self.kwargs:
            self.kwargs[METADATA] = {ENGINE_BUILD: self.engine.build()}

    def __call__(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
        self._name_build()
        return super().__call__(prompt, messages=messages, **kwargs)

    async def acall(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
        self._name_build()
        return await super().acall(prompt, messages=messages, **kwargs)
