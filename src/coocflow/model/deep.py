"""A standard multi-layer, multi-head transformer for the co-occurrence task (the `deep` experiment).

Where eq. (1) is one attention layer with a fixed readout, this is the architecture practitioners
train: token embedding, `layers` pre-LayerNorm blocks (x = x + MHA(LN(x)); x = x + MLP(LN(x)),
MLP m -> m1 -> m with GELU), a final LayerNorm, mean pooling over positions and a linear readout
to one logit. There is no positional embedding: the task is a bag of tokens, so the logit is
invariant to permuting a sample's positions. Attention is written out by hand so that every
layer's per-head attention weights can be returned and observed.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from coocflow.config import Config
from coocflow.data import Dataset

LAYER_NORM_EPS = 1e-5


class Block(eqx.Module):
    """One pre-LayerNorm block. Linear maps act on the right: y = x @ W, W of shape (fan_in, fan_out)."""

    attn_norm_scale: jax.Array  # (m,)
    attn_norm_bias: jax.Array  # (m,)
    W_Q: jax.Array  # (m, m)
    W_K: jax.Array  # (m, m)
    W_V: jax.Array  # (m, m)
    W_O: jax.Array  # (m, m)
    mlp_norm_scale: jax.Array  # (m,)
    mlp_norm_bias: jax.Array  # (m,)
    W_in: jax.Array  # (m, m1)
    b_in: jax.Array  # (m1,)
    W_out: jax.Array  # (m1, m)
    b_out: jax.Array  # (m,)
    heads: int = eqx.field(static=True)


class DeepTransformer(eqx.Module):
    """Embedding (d, m), a tuple of `Block`s, final LayerNorm and a linear readout to one logit."""

    embedding: jax.Array  # (d, m)
    blocks: tuple[Block, ...]
    final_norm_scale: jax.Array  # (m,)
    final_norm_bias: jax.Array  # (m,)
    readout: jax.Array  # (m,)
    readout_bias: jax.Array  # ()

    @property
    def layers(self) -> int:
        return len(self.blocks)

    def __call__(self, tokens: jax.Array) -> tuple[jax.Array, list[jax.Array]]:
        return forward(self, tokens)


def layer_norm(x: jax.Array, scale: jax.Array, bias: jax.Array) -> jax.Array:
    """Normalize the last axis to zero mean and unit variance, then scale and shift."""
    mean = x.mean(axis=-1, keepdims=True)
    variance = jnp.square(x - mean).mean(axis=-1, keepdims=True)
    return (x - mean) / jnp.sqrt(variance + LAYER_NORM_EPS) * scale + bias


def multi_head_attention(block: Block, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Softmax attention of every query position over every key position, per head.

    x is (n, L, m). Returns the block's attention output (n, L, m) and the weights
    (n, heads, L_query, L_key), each row a distribution over the keys.
    """
    n, L, m = x.shape
    head_width = m // block.heads

    def split_heads(W: jax.Array) -> jax.Array:
        return (x @ W).reshape(n, L, block.heads, head_width)

    queries, keys, values = split_heads(block.W_Q), split_heads(block.W_K), split_heads(block.W_V)
    scores = jnp.einsum("nqhc,nkhc->nhqk", queries, keys) / math.sqrt(head_width)
    weights = jax.nn.softmax(scores, axis=-1)
    mixed = jnp.einsum("nhqk,nkhc->nqhc", weights, values).reshape(n, L, m)
    return mixed @ block.W_O, weights


def mlp(block: Block, x: jax.Array) -> jax.Array:
    """Position-wise MLP m -> m1 -> m with the exact (erf) GELU."""
    hidden = jax.nn.gelu(x @ block.W_in + block.b_in, approximate=False)
    return hidden @ block.W_out + block.b_out


def forward(model: DeepTransformer, tokens: jax.Array) -> tuple[jax.Array, list[jax.Array]]:
    """Logits (n,) of the token samples (n, L), and the attention weights of every layer,
    a list of `layers` arrays of shape (n, heads, L_query, L_key)."""
    x = model.embedding[tokens]
    attentions = []
    for block in model.blocks:
        update, weights = multi_head_attention(block, layer_norm(x, block.attn_norm_scale, block.attn_norm_bias))
        x = x + update
        x = x + mlp(block, layer_norm(x, block.mlp_norm_scale, block.mlp_norm_bias))
        attentions.append(weights)
    pooled = layer_norm(x, model.final_norm_scale, model.final_norm_bias).mean(axis=1)
    return pooled @ model.readout + model.readout_bias, attentions


def deep_logits(model: DeepTransformer, tokens: jax.Array) -> jax.Array:
    """The logits F(x) alone, shape (n,)."""
    return forward(model, tokens)[0]


def deep_loss(model: DeepTransformer, data: Dataset) -> jax.Array:
    """Mean logistic loss softplus(-y F(x)) over the samples of `data`."""
    return jnp.mean(jax.nn.softplus(-data.labels * deep_logits(model, data.tokens)))


def init_deep_transformer(config: Config, key: jax.Array) -> DeepTransformer:
    """Draw a `DeepTransformer` of widths `model.m`, `model.m1`, depth `model.layers` and
    `model.heads` heads, in `config.dtype`, from `key`.

    Scales: embedding entries N(0, 1), so a token vector already has the unit per-coordinate
    scale LayerNorm produces; every linear map N(0, 1/fan_in) (LeCun normal, which keeps
    activations O(1)), except the two maps that write into the residual stream (W_O and the
    MLP's W_out), which are further divided by sqrt(2 layers) as in GPT-2 so the residual stream
    does not grow with depth; biases 0; LayerNorm scales 1 and shifts 0; readout N(0, 1/m), so
    the initial logits are O(1). All weights come from one standard-normal draw, cut in order
    (one random kernel to compile instead of one per weight shape, which dominates on CPU).
    """
    m, m1, d, layers, heads = config.model.m, config.model.m1, config.data.d, config.model.layers, config.model.heads
    dtype = jnp.dtype(config.dtype)
    residual = 1.0 / math.sqrt(2 * layers)
    block_weights = {"W_Q": ((m, m), 1 / math.sqrt(m)), "W_K": ((m, m), 1 / math.sqrt(m)),
                     "W_V": ((m, m), 1 / math.sqrt(m)), "W_O": ((m, m), residual / math.sqrt(m)),
                     "W_in": ((m, m1), 1 / math.sqrt(m)), "W_out": ((m1, m), residual / math.sqrt(m1))}
    weights = [("embedding", (d, m), 1.0), ("readout", (m,), 1 / math.sqrt(m))]
    weights += [((layer, name), shape, std) for layer in range(layers) for name, (shape, std) in block_weights.items()]
    sizes = [math.prod(shape) for _, shape, _ in weights]
    pieces = jnp.split(jax.random.normal(key, (sum(sizes),), dtype=dtype), np.cumsum(sizes)[:-1])
    drawn = {name: std * piece.reshape(shape) for (name, shape, std), piece in zip(weights, pieces)}

    def block(layer: int) -> Block:
        return Block(
            attn_norm_scale=jnp.ones(m, dtype), attn_norm_bias=jnp.zeros(m, dtype),
            mlp_norm_scale=jnp.ones(m, dtype), mlp_norm_bias=jnp.zeros(m, dtype),
            b_in=jnp.zeros(m1, dtype), b_out=jnp.zeros(m, dtype), heads=heads,
            **{name: drawn[(layer, name)] for name in block_weights},
        )

    return DeepTransformer(
        embedding=drawn["embedding"], blocks=tuple(block(layer) for layer in range(layers)),
        final_norm_scale=jnp.ones(m, dtype), final_norm_bias=jnp.zeros(m, dtype),
        readout=drawn["readout"], readout_bias=jnp.zeros((), dtype),
    )
