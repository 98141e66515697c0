"""The no-refinement strategy: initial instructions only (the paper's "without self-improvement" condition)."""

from __future__ import annotations

from syntra_dspy.optimizers.self_improve import SelfImprove


class NoRefinement(SelfImprove):
    """Drafts the task definition (when inferred) and the initial instructions once, and evaluates nothing."""

    strategy = "none"
    evaluates = False

    def adapt_task_definition(self, examples):
        from syntra_dspy.optimizers.loop import unevaluated
        from syntra_dspy.programs import context as ctx

        with self._stage("task_definition"):
            definition = self.infer_task_definition(examples)
        return definition, unevaluated("task_definition", ctx.task_definition_text(definition))
