"""Observables against direct NumPy computations from their definitions (docs/definitions.md sections 3, 7)."""

import jax.numpy as jnp
import numpy as np

from coocflow.data import Dataset
from coocflow.model import Transformer
from coocflow.observables import OBSERVABLES, Problem, names, observe

from conftest import load_golden

REQUIRED = (
    ["t", "step", "loss", "loss_I1", "loss_I2", "loss_I3", "loss_I4", "train_acc", "min_margin",
     "test_loss", "test_acc", "G_mu1", "G_mu2", "G_mu3", "G_rand_mean", "G_rand_maxabs"]
    + [f"A_mu{a}_mu{b}" for a in (1, 2, 3) for b in (1, 2, 3)]
    + ["p_q1_k2", "p_q2_k1", "p_q1_k3", "p_q2_k3"]
    + [f"V_mu{a}_mu{b}" for a in (1, 2, 3) for b in (1, 2, 3) if a <= b]
    + ["u_norm2", "S_I1", "S_I2", "S_I3", "S_I4"]
)


def reference(g):
    """A plain NumPy forward pass with dense one-hot embeddings, written from eq. (1)."""
    WQ, WK, WV, W, a = g["W_Q"], g["W_K"], g["W_V"], g["W"], g["a"]
    m, d = WQ.shape
    X = np.eye(d)[g["tokens"]]  # (n, L, d)
    K, Q = X @ WK.T, X @ WQ.T
    s = np.einsum("nhk,nlk->nhl", K, Q) / np.sqrt(m)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    G = X @ WV.T @ W.T @ a
    F = np.einsum("nh,nhl->n", G, p)
    return p, F


def test_observables_match_definitions():
    g = load_golden("small")
    model = Transformer(*(jnp.asarray(g[k]) for k in ("W_Q", "W_K", "W_V", "W", "a")))
    data = Dataset(jnp.asarray(g["tokens"]), jnp.asarray(g["labels"]), jnp.asarray(g["groups"]))
    obs = {k: float(v) for k, v in observe(model, Problem(data, data)).items()}
    p, F = reference(g)
    y, groups, tokens = g["labels"], g["groups"], g["tokens"]
    losses = np.log1p(np.exp(-y * F))
    gi = 1 / (1 + np.exp(y * F))
    A = g["W_K"].T @ g["W_Q"]
    gram = g["W_V"].T @ g["W_V"]
    Gv = g["expected_G"]
    assert np.isclose(obs["loss"], losses.mean(), rtol=1e-12)
    for k in range(4):
        assert np.isclose(obs[f"loss_I{k + 1}"], losses[groups == k].mean(), rtol=1e-12)
        assert np.isclose(obs[f"S_I{k + 1}"], gi[groups == k].sum(), rtol=1e-12)
    assert np.isclose(obs["train_acc"], np.mean(y * F > 0), rtol=1e-15)
    assert np.isclose(obs["min_margin"], np.min(y * F), rtol=1e-12)
    for a in (1, 2, 3):
        assert np.isclose(obs[f"G_mu{a}"], Gv[a - 1], rtol=1e-12)
        for b in (1, 2, 3):
            assert np.isclose(obs[f"A_mu{a}_mu{b}"], A[a - 1, b - 1], rtol=1e-12)
            if a <= b:
                assert np.isclose(obs[f"V_mu{a}_mu{b}"], gram[a - 1, b - 1], rtol=1e-12)
    assert np.isclose(obs["G_rand_mean"], Gv[3:].mean(), rtol=1e-12)
    assert np.isclose(obs["G_rand_maxabs"], np.abs(Gv[3:]).max(), rtol=1e-12)
    u = g["W"].T @ g["a"]
    assert np.isclose(obs["u_norm2"], u @ u, rtol=1e-12)
    for q, k in ((1, 2), (2, 1), (1, 3), (2, 3)):
        weights = []
        for i, row in enumerate(tokens):
            if (q - 1) in row and (k - 1) in row:
                weights.append(p[i, list(row).index(k - 1), list(row).index(q - 1)])
        assert weights, "the golden set holds both tokens somewhere"
        assert np.isclose(obs[f"p_q{q}_k{k}"], np.mean(weights), rtol=1e-12), (q, k)
    s1, s2, s3, s4 = (gi[groups == k].sum() for k in range(4))
    assert np.isclose(obs["R"], (s2 + s3 + s4 - s1) / (s1 - s2), rtol=1e-10)
    assert np.isclose(obs["bal_S2_S3"], abs(s2 - s3) / min(s2, s3), rtol=1e-10)


def test_every_required_column_is_registered():
    columns = ["t", "step"] + names()
    missing = [c for c in REQUIRED if c not in columns]
    assert not missing, missing
    assert all(OBSERVABLES[n].doc for n in names())
