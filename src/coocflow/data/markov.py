"""Next-token data from a random first-order Markov chain (the `markov` experiment).

The authors' suggested next step after word co-occurrence: predict token L+1 of a sequence
drawn from a Markov chain over the d vocabulary states. The best any predictor can do is the
chain's conditional P[x_L, .], whose expected loss is the entropy rate H = sum_i pi_i H(P_i);
a predictor that ignores the context reaches about the stationary entropy H(pi) >= H. Both
are computed here so training curves can be read against them.

Everything is drawn from a seed with NumPy's PCG64 generator: the chain, the training set and
the test set each from their own stream, so a dataset is a pure function of (sizes, seed).
The entropies and Bayes losses are jitted: called eagerly they compile one program, not one
per operation.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import entr

DIRICHLET_ALPHA = 0.2
"""Concentration of each transition row ~ Dirichlet(alpha, ..., alpha). Below 1 the rows put
most of their mass on a few next states, so the chain is predictable (H well below log d) and
the context matters (H well below H(pi))."""

CHAIN_STREAM, TRAIN_STREAM, TEST_STREAM = 20, 21, 22
"""PCG64 stream labels: the generator of each is default_rng([seed, label])."""


class MarkovChain(eqx.Module):
    """A first-order chain: transition[i, j] = P(next = j | current = i), and its stationary pi."""

    transition: jnp.ndarray  # (d, d), rows sum to 1
    stationary: jnp.ndarray  # (d,), pi P = pi

    @property
    def d(self) -> int:
        return self.transition.shape[-1]


class MarkovDataset(eqx.Module):
    """Next-token samples: the first L tokens of a sequence and its token L+1.

    The chain that generated them travels with them, so the Bayes loss and the entropy rate are
    functions of the data alone (and vmap over a seed ensemble like the tokens do).
    """

    tokens: jnp.ndarray  # (n, L) int
    targets: jnp.ndarray  # (n,) int
    chain: MarkovChain

    @property
    def n(self) -> int:
        return self.tokens.shape[0]


def stationary_distribution(transition: np.ndarray) -> np.ndarray:
    """The pi with pi P = pi and sum(pi) = 1, by least squares on the stacked equations.

    Dirichlet rows are positive almost surely, so the chain is irreducible and pi is unique;
    least squares stays well behaved when some transitions are tiny.
    """
    d = transition.shape[0]
    system = np.vstack([transition.T - np.eye(d), np.ones((1, d))])
    rhs = np.concatenate([np.zeros(d), [1.0]])
    pi, *_ = np.linalg.lstsq(system, rhs, rcond=None)
    pi = np.clip(pi, 0.0, None)
    return pi / pi.sum()


def random_chain(d: int, seed: int, alpha: float = DIRICHLET_ALPHA, dtype: str = "float64") -> MarkovChain:
    """A chain over d states whose rows are independent Dirichlet(alpha) draws from `seed`."""
    rng = np.random.default_rng([seed, CHAIN_STREAM])
    transition = rng.dirichlet(np.full(d, alpha), size=d)
    transition /= transition.sum(axis=1, keepdims=True)
    pi = stationary_distribution(transition)
    return MarkovChain(jnp.asarray(transition, dtype=dtype), jnp.asarray(pi, dtype=dtype))


@jax.jit
def entropy_rate(chain: MarkovChain) -> jnp.ndarray:
    """H = sum_i pi_i H(P_i) in nats: the expected loss of the Bayes-optimal next-token predictor."""
    return jnp.dot(chain.stationary, jnp.sum(entr(chain.transition), axis=-1))


@jax.jit
def stationary_entropy(chain: MarkovChain) -> jnp.ndarray:
    """H(pi) in nats: the loss of predicting every next token from pi alone, context ignored."""
    return jnp.sum(entr(chain.stationary))


def sample_sequences(chain: MarkovChain, n: int, length: int, rng: np.random.Generator) -> np.ndarray:
    """n sequences of `length` states, the first drawn from pi (so every position is
    stationary), each next one from the current state's row, by inverse CDF."""
    transition = np.asarray(chain.transition, dtype=np.float64)
    cumulative = np.cumsum(transition, axis=1)
    start = np.cumsum(np.asarray(chain.stationary, dtype=np.float64))
    last = chain.d - 1
    sequences = np.empty((n, length), dtype=np.int64)
    sequences[:, 0] = np.minimum(np.searchsorted(start, rng.random(n) * start[-1], side="right"), last)
    for position in range(1, length):
        rows = cumulative[sequences[:, position - 1]]
        draws = rng.random(n)[:, None] * rows[:, -1:]
        sequences[:, position] = np.minimum((draws >= rows).sum(axis=1), last)
    return sequences


def sample_dataset(chain: MarkovChain, n: int, L: int, rng: np.random.Generator) -> MarkovDataset:
    """n sequences of L+1 states: the first L are the input, the last the target."""
    sequences = sample_sequences(chain, n, L + 1, rng)
    return MarkovDataset(jnp.asarray(sequences[:, :L]), jnp.asarray(sequences[:, L]), chain)


def make_markov_sets(d: int, L: int, n: int, n_test: int, seed: int, alpha: float = DIRICHLET_ALPHA,
                     dtype: str = "float64") -> tuple[MarkovDataset, MarkovDataset]:
    """One seed's chain with its training set (n sequences) and test set (n_test fresh ones)."""
    chain = random_chain(d, seed, alpha, dtype)
    train = sample_dataset(chain, n, L, np.random.default_rng([seed, TRAIN_STREAM]))
    test = sample_dataset(chain, n_test, L, np.random.default_rng([seed, TEST_STREAM]))
    return train, test


@jax.jit
def bayes_losses(data: MarkovDataset) -> jnp.ndarray:
    """Per-sample -log P[x_L, target]: the loss of the chain's own conditional (Bayes optimal,
    since the chain is first order). Its mean over a large sample tends to the entropy rate."""
    return -jnp.log(data.chain.transition[data.tokens[..., -1], data.targets])


@jax.jit
def bayes_loss(data: MarkovDataset) -> jnp.ndarray:
    return jnp.mean(bayes_losses(data))


@jax.jit
def bayes_accuracy(data: MarkovDataset) -> jnp.ndarray:
    """How often the chain's most likely next state is the target (the best possible accuracy)."""
    guess = jnp.argmax(data.chain.transition[data.tokens[..., -1]], axis=-1)
    return jnp.mean(guess == data.targets)
