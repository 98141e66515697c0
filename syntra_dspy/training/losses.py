"""The training loss a :class:`TrainConfig` names, built from sentence-transformers' own losses.

InfoNCE (``mnrl``, ``cached-mnrl``) learns from labels only. The distillation losses learn from the judge's grades
(a teacher score per positive and negative, in the dataset's ``label`` column): ``margin-mse`` is
``MarginMSELoss`` (the student's cosine margins between the positive and each negative regressed on the teacher's),
``distill-kl`` is ``DistillKLDivLoss`` (the student's softmax over the candidates at the InfoNCE temperature pulled
toward the teacher's at the same temperature). Either may be added to an InfoNCE term with weight
``infonce_weight``; the texts are then embedded once for both terms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torch import nn

from syntra_dspy.training.config import TrainConfig

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer


def build_loss(model: SentenceTransformer, config: TrainConfig) -> Any:
    """The loss module the trainer calls with (features, labels)."""
    from sentence_transformers.sentence_transformer import losses
    from sentence_transformers.util import pairwise_cos_sim

    if config.loss == "cached-mnrl":
        return losses.CachedMultipleNegativesRankingLoss(model, scale=config.scale,
                                                         mini_batch_size=config.mini_batch_size)
    if config.loss == "mnrl":
        return losses.MultipleNegativesRankingLoss(model, scale=config.scale)
    if config.loss == "margin-mse":
        distill = losses.MarginMSELoss(model, similarity_fct=pairwise_cos_sim)
    else:
        distill = losses.DistillKLDivLoss(model, similarity_fct=pairwise_cos_sim, temperature=config.temperature)
    if not config.infonce_weight:
        return distill
    return WeightedLosses(model, [(1.0, distill),
                                  (config.infonce_weight,
                                   losses.MultipleNegativesRankingLoss(model, scale=config.scale))])


class WeightedLosses(nn.Module):
    """A weighted sum of sentence-transformers losses over one embedding pass (each term's
    ``compute_loss_from_embeddings``), so adding InfoNCE to a distillation loss costs no second forward."""

    def __init__(self, model: SentenceTransformer, terms: list[tuple[float, Any]]) -> None:
        super().__init__()
        self.model = model
        self.weights = [w for w, _ in terms]
        self.terms = nn.ModuleList([loss for _, loss in terms])

    def forward(self, sentence_features: Any, labels: Any) -> Any:
        from sentence_transformers.base.losses.merged_forward import embed_columns

        embeddings = embed_columns(self.model, sentence_features)
        return sum(w * loss.compute_loss_from_embeddings(embeddings, labels)
                   for w, loss in zip(self.weights, self.terms, strict=True))

    def get_config_dict(self) -> dict[str, Any]:
        return {"terms": [{"weight": w, "loss": type(loss).__name__} for w, loss in
                          zip(self.weights, self.terms, strict=True)]}
