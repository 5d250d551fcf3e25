"""An independent float64 implementation of eq. (1) and its gradient descent, in plain NumPy.

Written from docs/definitions.md section 3 with dense one-hot embeddings and hand-derived backpropagation, so it
shares no code with coocflow. Used to replay a run folder's `state_init.npz`.
"""

import numpy as np


def forward_backward(state: dict[str, np.ndarray]):
    WQ, WK, WV, W, a = (state[k] for k in ("W_Q", "W_K", "W_V", "W", "a"))
    y = state["labels"]
    m, d = WQ.shape
    n = len(y)
    X = np.eye(d)[state["tokens"]]  # (n, L, d)
    K, Q = X @ WK.T, X @ WQ.T  # (n, L, m)
    s = np.einsum("nhk,nlk->nhl", K, Q) / np.sqrt(m)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    u = W.T @ a
    Gx = X @ (WV.T @ u)  # (n, L)
    F = np.einsum("nh,nhl->n", Gx, p)
    loss = np.mean(np.logaddexp(0.0, -y * F))
    c = -y / (1 + np.exp(y * F)) / n  # dLoss/dF
    dGx = c[:, None] * p.sum(axis=2)
    dp = c[:, None, None] * Gx[:, :, None]
    ds = p * (dp - np.sum(p * dp, axis=1, keepdims=True))
    dK = np.einsum("nhl,nlk->nhk", ds, Q) / np.sqrt(m)
    dQ = np.einsum("nhl,nhk->nlk", ds, K) / np.sqrt(m)
    grads = {
        "W_K": np.einsum("nhk,nhd->kd", dK, X),
        "W_Q": np.einsum("nlk,nld->kd", dQ, X),
    }
    dG_vocab = np.einsum("nh,nhd->d", dGx, X)
    grads["W_V"] = np.outer(u, dG_vocab)
    grads["W"] = np.outer(a, WV @ dG_vocab)
    return loss, grads


def replay(state: dict[str, np.ndarray], lr: float, steps: np.ndarray) -> np.ndarray:
    """Loss at each of `steps` (sorted, starting at 0) under plain gradient descent."""
    state = {k: np.array(v, dtype=np.float64) if k not in ("tokens", "groups") else v for k, v in state.items()}
    losses, done = [], 0
    for target in steps:
        while done < target:
            _, grads = forward_backward(state)
            for key, grad in grads.items():
                state[key] = state[key] - lr * grad
            done += 1
        losses.append(forward_backward(state)[0])
    return np.array(losses)
