"""The gradient flow and gradient descent of eq. (1) on Gram matrices instead of weights.

The loss sees the weights only through A = W_K^T W_Q (d x d) and G = W_V^T u (d,), u = W^T a.
With M = dL/dA and c = dL/dG, dL/dW_Q = W_K M, dL/dW_K = W_Q M^T, dL/dW_V = u c^T and
dL/dW = a (W_V c)^T, so the Grams P = W_Q^T W_Q, K = W_K^T W_K, A, V = W_V^T W_V, G and
s = u^T u move in a closed system (a^T a = m1 because a is +-1):

    dA/dt = -(K M + M P)          dV/dt = -(c G^T + G c^T)
    dP/dt = -(A^T M + M^T A)      dG/dt = -(m1 V c + s c)
    dK/dt = -(A M^T + M A^T)      ds/dt = -2 m1 G^T c

and one gradient-descent step of size h on the weights is, exactly, the same with the h^2 terms
that the products of the two updated factors add (`gram_gd_step`). Its size is 4 d^2 + d + 1
numbers whatever the widths m and m1, which enter only as the constants 1/sqrt(m) and m1.

With `model.neurons` the state also resolves the MLP's neurons w_j (the rows of W): their Gram
N = W W^T (m1 x m1), their values Z = W W_V (m1 x d, Z[j, mu] = w_j^T W_V mu) and the fixed
output signs a. Since dW/dt = -a (W_V c)^T and dW_V/dt = -W^T a c^T, they close on themselves
and V, G:

    dN/dt = -(a (Z c)^T + (Z c) a^T)    dZ/dt = -(a (V c)^T + (N a) c^T)

with G = Z^T a and s = a^T N a. They ride along: G and s still move by their own equations,
so a run without neurons computes exactly what it did, and the two agree to rounding.

M is nonzero only at token pairs that share a training sample, M = sum_i E_i^T S_i E_i with E_i
the (L x d) one-hot rows of sample i and S_i = dL/d(A[x_h, x_l]) its (L x L) block. So M X
and M^T X are nonzero only on the rows of the U <= min(n L, d) distinct training tokens: each
is a gather of n L rows of X, an (L x L) contraction per sample and a scatter-add into U
compact rows, O(d n L^2) work, never the O(d^3) of a dense M; X M and X M^T are their
transposes (P and K are symmetric). Every d x d result is then written in one pass, as its
base plus compact rows gathered by row plus compact rows gathered by column.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from coocflow.data import Dataset
from coocflow.model.base import AbstractState
from coocflow.model.transformer import Transformer, score_matrix, token_mlp

TRAINABLE_SETS = ("all", "mlp-value")


def _width(m) -> jnp.ndarray:
    """A width (m or m1) as a float64 array leaf, not a static field: every width then shares one
    compiled solve, the width being a traced constant whose velocity is zero (`velocity`) and
    which the step control leaves out (`GramState.grams`)."""
    return jnp.asarray(m, dtype=jnp.float64)


class GramState(AbstractState):
    """The Grams of the weights of eq. (1); the loss is a function of A and G alone. The final
    Gram-space implementation of `AbstractState`: each method reads the Gram that holds the
    quantity, and the flow is the closed system of the module docstring."""

    A: jnp.ndarray  # (d, d) W_K^T W_Q: A[nu, mu] is the score of key token nu for query token mu, times sqrt(m)
    P: jnp.ndarray  # (d, d) W_Q^T W_Q: Gram of the query weights
    K: jnp.ndarray  # (d, d) W_K^T W_K: Gram of the key weights
    V: jnp.ndarray  # (d, d) W_V^T W_V: Gram of the value weights
    G: jnp.ndarray  # (d,) W_V^T u: the MLP's output G(x) at every token, u = W^T a
    s: jnp.ndarray  # () u^T u = ||W^T a||^2, the quantity of eq. (5)
    m: jnp.ndarray = eqx.field(converter=_width)  # () width of W_Q, W_K, W_V; scores are A[x_h, x_l] / sqrt(m)
    m1: jnp.ndarray = eqx.field(converter=_width)  # () MLP neurons, a^T a = m1
    N: jnp.ndarray | None = None  # (m1, m1) W W^T: the neurons' inner products <w_j, w_k>; None unless resolved
    Z: jnp.ndarray | None = None  # (m1, d) W W_V: Z[j, mu] = w_j^T W_V mu, the neurons' values; None unless resolved
    a: jnp.ndarray | None = None  # (m1,) the fixed +-1 output weights; None unless the neurons are resolved

    @property
    def has_neurons(self) -> bool:
        """Whether the state resolves the MLP's neurons (N, Z, a), `model.neurons`."""
        return self.N is not None

    def scores(self) -> jnp.ndarray:
        return self.A

    def score_entry(self, key: int, query: int) -> jnp.ndarray:
        return self.A[key, query]

    def mlp(self) -> jnp.ndarray:
        return self.G

    def value_gram_entry(self, a: int, b: int) -> jnp.ndarray:
        return self.V[a, b]

    def key_gram_entry(self, a: int, b: int) -> jnp.ndarray:
        return self.K[a, b]

    def query_gram_entry(self, a: int, b: int) -> jnp.ndarray:
        return self.P[a, b]

    def value_gram(self) -> jnp.ndarray:
        return self.V

    def key_gram(self) -> jnp.ndarray:
        return self.K

    def query_gram(self) -> jnp.ndarray:
        return self.P

    def u_norm2(self) -> jnp.ndarray:
        return self.s

    def attention(self, tokens: jnp.ndarray) -> jnp.ndarray:
        return jax.nn.softmax(_raw_scores(self.A, tokens) / jnp.sqrt(self.m), axis=1)

    def logits(self, tokens: jnp.ndarray) -> jnp.ndarray:
        return jnp.einsum("nh,nhl->n", self.G[tokens], self.attention(tokens))

    def sample_losses(self, data: Dataset) -> jnp.ndarray:
        return gram_sample_losses(self, data)

    def loss(self, data: Dataset) -> jnp.ndarray:
        return gram_loss(self, data)

    def neuron_gram(self) -> jnp.ndarray:
        return self.N

    def neuron_values_at(self, token: int) -> jnp.ndarray:
        return self.Z[:, token]

    def neuron_values(self) -> jnp.ndarray:
        return self.Z

    def readout(self) -> jnp.ndarray | None:
        return self.a

    def mlp_rate(self, velocity: "GramState") -> jnp.ndarray:
        """G is a Gram of the state: its rate is the velocity's."""
        return velocity.G

    def neuron_value_rates(self, velocity: "GramState") -> jnp.ndarray:
        return velocity.Z

    def neuron_count(self) -> jnp.ndarray:
        """m1 as a scalar of the state's dtype: a traced value (one compiled program serves every
        m1), which readers outside a trace turn into an int."""
        return self.m1.astype(self.dtype)

    def width(self) -> int:
        return int(np.ravel(np.asarray(self.m))[0])

    def vocabulary(self) -> int:
        return int(self.A.shape[-1])

    @property
    def dtype(self):
        return self.A.dtype

    def split(self, trainable: str = "all") -> tuple["GramState", None]:
        """A Gram state moves as a whole (which of its Grams stay fixed under `trainable` is the
        velocity's business), with no fixed part."""
        return self, None

    def join(self, fixed: None) -> "GramState":
        return self

    def velocity(self, fixed: None, data: Dataset, trainable: str = "all") -> "GramState":
        return gram_velocity(self, data, trainable)

    def error_norm(self) -> jnp.ndarray:
        """The norm the flow's step-size control takes of a step's scaled error (Diffrax's default RMS
        norm) over the six Grams only: resolving the neurons N, Z, a (`model.neurons`) then changes no
        step, so the Grams are computed exactly as without them, and N, Z follow at the accuracy those
        steps give (tests/test_neuron_gram.py measures it); the width m, a constant leaf, is left out."""
        import optimistix  # lazy: only the flow's step-size control needs it; discrete training never imports it

        return optimistix.rms_norm(self.grams())

    def arrays(self) -> dict[str, jnp.ndarray]:
        keys = ("A", "P", "K", "V", "G", "s") + (("N", "Z", "a") if self.has_neurons else ())
        return {**{key: getattr(self, key) for key in keys}, "m": np.asarray(np.ravel(self.m)[0], dtype=np.int64),
                "m1": np.asarray(np.ravel(self.m1)[0], dtype=np.int64)}

    def grams(self) -> tuple[jnp.ndarray, ...]:
        """The six Grams, the arrays the flow's step control measures (`error_norm`):
        not N, Z, which ride along, nor m and a, constants of the flow."""
        return (self.A, self.P, self.K, self.V, self.G, self.s)


def grams_from_weights(model: Transformer, neurons: bool = False) -> GramState:
    """The Grams of `model`'s weights (exact); with `neurons`, also N = W W^T, Z = W W_V and a."""
    u = model.u
    neuron_grams = dict(N=model.W @ model.W.T, Z=model.W @ model.W_V, a=model.a) if neurons else {}
    return GramState(
        A=score_matrix(model), P=model.W_Q.T @ model.W_Q, K=model.W_K.T @ model.W_K,
        V=model.W_V.T @ model.W_V, G=token_mlp(model), s=u @ u,
        m=model.W_Q.shape[0], m1=model.W.shape[0], **neuron_grams,
    )


def _raw_scores(A: jnp.ndarray, tokens: jnp.ndarray) -> jnp.ndarray:
    """A[x_h, x_l] for key position h and query position l, shape (n, L, L), before 1/sqrt(m)."""
    return A[tokens[:, :, None], tokens[:, None, :]]


def _logits_from(raw_scores: jnp.ndarray, g_tokens: jnp.ndarray, m: int) -> jnp.ndarray:
    """eq. (1): F = sum_l sum_h G(x_h) p_l[h], p_l = softmax over keys h of raw_scores / sqrt(m)."""
    p = jax.nn.softmax(raw_scores / jnp.sqrt(m), axis=1)
    return jnp.einsum("nh,nhl->n", g_tokens, p)


def _mean_loss_from(raw_scores: jnp.ndarray, G: jnp.ndarray, data: Dataset, m: int) -> jnp.ndarray:
    """Mean logistic loss as a function of the gathered scores and G (what `score_and_value_gradients` differentiates)."""
    return jnp.mean(jax.nn.softplus(-data.labels * _logits_from(raw_scores, G[data.tokens], m)))


def gram_logits(state: GramState, tokens: jnp.ndarray) -> jnp.ndarray:
    """F(X) of eq. (1) from A and G; equals `transformer.logits` for the same weights."""
    return _logits_from(_raw_scores(state.A, tokens), state.G[tokens], state.m)


def gram_sample_losses(state: GramState, data: Dataset) -> jnp.ndarray:
    """Per-sample logistic loss log(1 + exp(-y F))."""
    return jax.nn.softplus(-data.labels * gram_logits(state, data.tokens))


def gram_loss(state: GramState, data: Dataset) -> jnp.ndarray:
    """Mean logistic loss, the potential of the flow."""
    return jnp.mean(gram_sample_losses(state, data))


class TokenRows(eqx.Module):
    """A (d x d) matrix nonzero only on the rows of the training tokens, held compactly.

    Row x of the matrix is compact[slot[x]]; tokens absent from the training set have slot U,
    the last row of `compact`, which stays zero. `slot` is shared by every product of one M.
    Read out as rows or columns it is a gather, so a sum like A + X + Y^T is one pass over
    d x d memory; zero-filling and scatter-adding rows and then columns took three passes and
    25% longer (d = 1000, distinct tokens, n = 60 and 300, L = 5).
    """

    compact: jnp.ndarray  # (U + 1, d)
    slot: jnp.ndarray  # (d,) int in 0..U

    def plus(self, other: "TokenRows") -> "TokenRows":
        """The sum of two such matrices of the same M (an O(U d) addition)."""
        return TokenRows(self.compact + other.compact, self.slot)

    def as_rows(self) -> jnp.ndarray:
        """The matrix, (d, d)."""
        return self.compact[self.slot]

    def as_columns(self) -> jnp.ndarray:
        """Its transpose, (d, d)."""
        return self.compact.T[:, self.slot]

    def transpose_rows(self, tokens: jnp.ndarray) -> jnp.ndarray:
        """Rows `tokens` (n, L) of the transpose, shape (n, L, d), in O(n L d): row x of the
        transpose holds compact[slot[y], x] at column y."""
        n, L = tokens.shape
        return self.compact[:, tokens.reshape(-1)].T[:, self.slot].reshape(n, L, -1)


class ScoreGradient(eqx.Module):
    """M = dL/dA held sparsely: M = sum_i E_i^T blocks_i E_i, E_i the one-hot rows of sample i.

    blocks[i, h, l] = dL/dA[x_ih, x_il] (the 1/sqrt(m) of the scores included); repeated
    pairs add up. A product reads the n L rows X[x_ih] and contracts each sample's (L x L)
    block: O(d n L^2), never O(d^3). The contraction is a sum of L broadcast products, which
    XLA fuses with the row gathers; as a batched dot of (L x L) blocks it ran 4 times slower
    (XLA fused the gathers into the dot's operand).
    """

    tokens: jnp.ndarray  # (n, L) int
    blocks: jnp.ndarray  # (n, L, L)
    slot: jnp.ndarray  # (d,) int: compact row of each token (TokenRows)

    def scaled(self, factor) -> "ScoreGradient":
        """factor * M (an O(n L^2) rescaling of the blocks)."""
        return ScoreGradient(tokens=self.tokens, blocks=factor * self.blocks, slot=self.slot)

    def left(self, X: jnp.ndarray) -> TokenRows:
        """M X: row x_ih gets sum_l blocks[i, h, l] X[x_il]."""
        return self.left_of_rows(X[self.tokens])

    def left_transposed(self, X: jnp.ndarray) -> TokenRows:
        """M^T X: row x_il gets sum_h blocks[i, h, l] X[x_ih]."""
        return self.left_transposed_of_rows(X[self.tokens])

    def left_of_rows(self, rows: jnp.ndarray) -> TokenRows:
        """M X from rows = X[tokens] (n, L, d)."""
        L = self.tokens.shape[1]
        return self._collect(sum(self.blocks[:, :, l, None] * rows[:, None, l, :] for l in range(L)))

    def left_transposed_of_rows(self, rows: jnp.ndarray) -> TokenRows:
        """M^T X from rows = X[tokens] (n, L, d)."""
        L = self.tokens.shape[1]
        return self._collect(sum(self.blocks[:, h, :, None] * rows[:, h, None, :] for h in range(L)))

    def _collect(self, values: jnp.ndarray) -> TokenRows:
        """Sum per-position rows (n, L, d) into the compact rows of their tokens."""
        n_compact = min(self.tokens.size, self.slot.shape[0])
        compact = jnp.zeros((n_compact + 1, values.shape[-1]), values.dtype)
        return TokenRows(compact.at[self.slot[self.tokens]].add(values), self.slot)

    def dense(self) -> jnp.ndarray:
        """M as a (d x d) array, for tests only (O(d^2) memory)."""
        d = self.slot.shape[0]
        rows = jnp.broadcast_to(self.tokens[:, :, None], self.blocks.shape)
        cols = jnp.broadcast_to(self.tokens[:, None, :], self.blocks.shape)
        return jnp.zeros((d, d), self.blocks.dtype).at[rows, cols].add(self.blocks)


def token_slots(tokens: jnp.ndarray, d: int) -> jnp.ndarray:
    """slot[x] = rank of token x among the U = min(n L, d) sorted distinct training tokens (at
    most that many exist), U for a token absent from `tokens`; shape (d,)."""
    n_compact = min(tokens.size, d)
    distinct = jnp.unique(tokens, size=n_compact, fill_value=d)
    ranks = jnp.arange(n_compact, dtype=tokens.dtype)
    return jnp.full((d + 1,), n_compact, dtype=tokens.dtype).at[distinct].set(ranks)[:d]


def score_and_value_gradients(state: GramState, data: Dataset) -> tuple[ScoreGradient, jnp.ndarray]:
    """(M = dL/dA as a ScoreGradient, c = dL/dG (d,)), by autodiff of the loss with respect to
    the gathered scores A[x_h, x_l] (n, L, L) and G, never a dense A.

    The optimization barrier makes XLA compute the blocks once: without it, it fused the softmax
    gradient into every product and recomputed it for each of the n L d entries.
    """
    raw = _raw_scores(state.A, data.tokens)
    blocks, c = jax.grad(_mean_loss_from, argnums=(0, 1))(raw, state.G, data, state.m)
    blocks, c = jax.lax.optimization_barrier((blocks, c))
    return ScoreGradient(tokens=data.tokens, blocks=blocks, slot=token_slots(data.tokens, state.A.shape[0])), c


def _check_trainable(trainable: str) -> None:
    if trainable not in TRAINABLE_SETS:
        raise ValueError(f"trainable must be one of {', '.join(TRAINABLE_SETS)} (got '{trainable}')")


def gram_velocity(state: GramState, data: Dataset, trainable: str = "all") -> GramState:
    """The flow field d(state)/dt under d(theta)/dt = -grad L(theta) (the system in the module
    docstring); with `mlp-value` W_Q and W_K are frozen, so A, P, K do not move.

    K M is read as (M^T K)^T, K being symmetric; A^T M + M^T A and A M^T + M A^T are one
    product read as rows and as columns.
    """
    _check_trainable(trainable)
    M, c = score_and_value_gradients(state, data)
    m1 = state.neuron_count()
    dV = -(jnp.outer(c, state.G) + jnp.outer(state.G, c))
    dG = -(m1 * (state.V @ c) + state.s * c)
    ds = -2 * m1 * (state.G @ c)
    if trainable == "all":
        descent = M.scaled(-1.0)
        MtA, MAt = descent.left_transposed(state.A), descent.left(state.A.T)
        dA = descent.left(state.P).as_rows() + descent.left_transposed(state.K).as_columns()
        dP = MtA.as_rows() + MtA.as_columns()
        dK = MAt.as_rows() + MAt.as_columns()
    else:
        dA, dP, dK = jnp.zeros_like(state.A), jnp.zeros_like(state.P), jnp.zeros_like(state.K)
    return GramState(A=dA, P=dP, K=dK, V=dV, G=dG, s=ds, m=jnp.zeros_like(state.m), m1=jnp.zeros_like(state.m1),
                     **_neuron_velocity(state, c))


def _neuron_velocity(state: GramState, c: jnp.ndarray) -> dict:
    """dN/dt, dZ/dt (module docstring) and da/dt = 0, or nothing when the neurons are not resolved."""
    if not state.has_neurons:
        return {}
    a, Zc = state.a, state.Z @ c
    dN = -(jnp.outer(a, Zc) + jnp.outer(Zc, a))
    dZ = -(jnp.outer(a, state.V @ c) + jnp.outer(state.N @ a, c))
    return dict(N=dN, Z=dZ, a=jnp.zeros_like(a))


def _neuron_step(state: GramState, e: jnp.ndarray, Ve: jnp.ndarray, Ge: jnp.ndarray) -> dict:
    """N, Z (and the fixed a) after one gradient step e = -h c (`gram_gd_step`), or nothing when
    the neurons are not resolved. W' = W + a (W_V e)^T and W_V' = W_V + W^T a e^T give

        N' = N + a (Z e)^T + (Z e) a^T + (e^T V e) a a^T
        Z' = Z + (N a) e^T + a (V e)^T + (G^T e) a e^T
    """
    if not state.has_neurons:
        return {}
    a, N, Z = state.a, state.N, state.Z
    Ze = Z @ e
    N_next = N + jnp.outer(a, Ze) + jnp.outer(Ze, a) + (e @ Ve) * jnp.outer(a, a)
    Z_next = Z + jnp.outer(N @ a, e) + jnp.outer(a, Ve) + Ge * jnp.outer(a, e)
    return dict(N=N_next, Z=Z_next, a=a)


def gram_gd_step(state: GramState, data: Dataset, lr, trainable: str = "all") -> GramState:
    """One full-batch gradient-descent step theta <- theta - lr grad L(theta) on the weights,
    written exactly on the Grams (the h^2 terms come from the product of two updated factors):

        A' = A - h(K M + M P) + h^2 M A^T M      V' = V - h(c G^T + G c^T) + h^2 s c c^T
        P' = P - h(A^T M + M^T A) + h^2 M^T K M  G' = G - h(m1 V c + s c) + h^2 m1 c (G^T c)
        K' = K - h(A M^T + M A^T) + h^2 M P M^T  s' = s - 2 h m1 G^T c + h^2 m1^2 c^T V c

    With N = -h M and e = -h c the step is W_Q' = W_Q + W_K N, W_K' = W_K + W_Q N^T,
    W_V' = W_V + u e^T, u' = u + m1 W_V e, and each line is the Gram of the updated factors.
    Resolved neurons step as in `_neuron_step` (h^2 terms (c^T V c) a a^T in N, (c^T G) a c^T in Z).
    """
    _check_trainable(trainable)
    M, c = score_and_value_gradients(state, data)
    m1, A, P, K, V, G, s = state.neuron_count(), state.A, state.P, state.K, state.V, state.G, state.s
    e = -lr * c
    Ve, Ge = V @ e, G @ e
    V_next = V + jnp.outer(e, G) + jnp.outer(G, e) + s * jnp.outer(e, e)
    G_next = G + m1 * Ve + s * e + m1 * Ge * e
    s_next = s + 2 * m1 * Ge + m1**2 * (e @ Ve)
    if trainable == "all":
        N = M.scaled(-lr)
        NP, NtK, NtA, NAt = N.left(P), N.left_transposed(K), N.left_transposed(A), N.left(A.T)
        NAtN = N.left_transposed_of_rows(NAt.transpose_rows(N.tokens))  # (N A^T N)^T = N^T (N A^T)^T
        NtKN = N.left_transposed_of_rows(NtK.transpose_rows(N.tokens))  # N^T K N = N^T (N^T K)^T
        NPNt = N.left_of_rows(NP.transpose_rows(N.tokens))  # N P N^T = N (N P)^T
        A_next = A + NP.as_rows() + NtK.plus(NAtN).as_columns()
        P_next = P + NtA.plus(NtKN).as_rows() + NtA.as_columns()
        K_next = K + NAt.plus(NPNt).as_rows() + NAt.as_columns()
    else:
        A_next, P_next, K_next = A, P, K
    return GramState(A=A_next, P=P_next, K=K_next, V=V_next, G=G_next, s=s_next, m=state.m, m1=state.m1,
                     **_neuron_step(state, e, Ve, Ge))
