"""The one-layer transformer of eq. (1), its loss, and its initialization."""

from coocflow.model.init import init_model
from coocflow.model.transformer import (
    Transformer,
    attention,
    combine,
    logits,
    logits_embedded,
    loss,
    loss_grad,
    partition,
    sample_losses,
    score_matrix,
    scores,
    token_mlp,
    trainable_loss,
    trainable_spec,
)

__all__ = [
    "Transformer", "attention", "combine", "init_model", "logits", "logits_embedded", "loss", "loss_grad",
    "partition", "sample_losses", "score_matrix", "scores", "token_mlp", "trainable_loss",
    "trainable_spec",
]
