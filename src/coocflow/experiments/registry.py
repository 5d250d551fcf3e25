"""The registry of named experiments.

An experiment is a base configuration (dotted overrides of the defaults) and a description.
`paper` is the paper's experiment as stated (docs/definitions.md section 5); `paper-phenomena`
is the nearest setting in which the paper's Figure 1 phenomena are visible (see the README for
what differs and why).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from coocflow.config import Config
from coocflow.errors import ConfigError


@dataclass(frozen=True)
class Experiment:
    """A base configuration; `study` names a multi-variant study (experiments/studies.py) that
    writes its own figures and summary instead of a single run folder."""

    name: str
    description: str
    overrides: dict[str, Any] = field(default_factory=dict)
    study: str | None = None
    scaling_widths: tuple[int, ...] = ()
    """`coocflow verify NAME --scaling AXIS` without --values runs these widths (default 32..256)."""
    scaling_seeds: int = 4
    """... and this many seeds per width without --seeds."""

    def config(self) -> Config:
        return Config(name=self.name).replace(self.overrides)


PAPER = {
    "data.n": 60, "data.L": 5, "data.d": 64, "data.random_tokens": "uniform",
    "model.m": 128, "model.m1": 256, "init.scheme": "kaiming",
    "train.method": "gd", "train.lr": 0.01, "train.steps": 30000,
}

THEORY = {
    "data.n": 96, "data.L": 3, "data.d": 67, "data.random_tokens": "distinct", "data.n_test": 96,
    "model.m": 4096, "model.m1": 4, "model.space": "gram", "init.scheme": "theory", "init.c0": 0.002, "init.c1": 1.0,
    "train.method": "flow", "train.lr": 1e-6, "train.t_end": 100.0, "observe.points": 200,
}
"""Premises (docs/claims.md section 1) at m = 4096: m/(m1 log^2(m1/delta)) = 53, m/L^2 = 455, m1/m = 1/1024,
n/L^2 = 10.7, d - 3 = 64 random slots all distinct, Fmax0 ~ 0.004; the flow's first observed time
1e-6 resolves Phase 1 (T1 ~ 1/(c1^2 m))."""

EXPERIMENTS: dict[str, Experiment] = {
    e.name: e
    for e in (
        Experiment(
            "paper",
            "The paper's experiment as stated: n=60 (30/10/10/10), L=5, d=64, m=128, m1=256, Kaiming init, "
            "GD with lr 0.01 for 30000 steps (t = 300).",
            PAPER,
        ),
        Experiment(
            "paper-phenomena",
            "The paper's setting with W initialized 100x smaller (init.c1=0.01: the output starts near 0, "
            "loss log 2) and lr 0.001 for 300000 steps (same t = 300) so GD resolves the I2/I3 rise, "
            "which peaks near t = 0.01, one step of lr 0.01.",
            {**PAPER, "init.c1": 0.01, "train.lr": 0.001, "train.steps": 300000},
        ),
        Experiment(
            "theory",
            "The theory's regime, every premise of docs/claims.md met: distinct random tokens with n L <= d "
            "(n=96, L=3, d=67), Gaussian Condition 1 init with a near-zero output at t = 0 (c0=0.002, c1=1), "
            "m=4096 >> m1=4 and L^2, the gradient flow to t = 100 from t = 1e-6, in the Gram space (any width).",
            THEORY, scaling_widths=(64, 128, 256, 512, 1024, 2048, 4096, 16384, 65536, 100000, 1000000), scaling_seeds=8,
        ),
        Experiment(
            "generalization",
            "Train and test accuracy and loss along the flow to t = 300 for 8 seeds of the paper's setting, uniform and distinct "
            "random tokens, with the fitted decay rates of train and test loss side by side (the authors' "
            "Figure 2 in their answers).",
            {**PAPER, "seeds": list(range(8)), "train.method": "flow"}, study="generalization",
        ),
        Experiment(
            "unseen-tokens",
            "Distinct random tokens (d = 320: 160 in training, 157 never seen), the flow to t = 10^4, 4 seeds; the same "
            "training run is tested on samples whose random tokens were seen in training and on samples whose "
            "random tokens never were: attention and |G| they receive over t.",
            {**PAPER, "data.random_tokens": "distinct", "data.d": 320, "train.method": "flow",
             "train.t_end": 1e4, "observe.points": 100, "seeds": list(range(4))}, study="unseen-tokens",
        ),
        Experiment(
            "relaxed-data",
            "Uniform versus distinct random tokens across d (64; 163 = the smallest distinct d, ~ nL; 652), "
            "GD lr 0.01 to t = 50, 4 seeds each: T1, the start of Phase 2, and the final attention pattern.",
            {**PAPER, "train.steps": 5000, "observe.points": 100, "seeds": list(range(4))}, study="relaxed-data",
        ),
        Experiment(
            "deep",
            "A 2-layer, 4-head pre-LayerNorm transformer (residual connections, GELU MLP, mean-pooled readout, "
            "width 64) on the paper's data, Adam lr 0.0001 for 600 steps, 4 seeds: when classification becomes correct versus "
            "when the loss falls, and attention to the target words per layer.",
            {**PAPER, "model.m": 64, "model.m1": 128, "model.layers": 2, "model.heads": 4, "train.method": "adam",
             "train.lr": 0.0001, "train.steps": 600, "seeds": list(range(4)), "observe.points": 80},
            study="deep",
        ),
        Experiment(
            "optimizers",
            "GD, mini-batch SGD (batch 10), momentum, Adam and AdamW from the same data and initialization "
            "(4 seeds, small output at init, t = 50): T1, score movement, final attention.",
            {**PAPER, "init.c1": 0.01, "train.steps": 5000, "seeds": list(range(4))}, study="optimizers",
        ),
        Experiment(
            "init-scale",
            "Kaiming with c1 = 1, 0.1, 0.01 and the theory's Condition 1 (c0 = 1, 0.3): the I2/I3 rise, T1, "
            "and how far the scores move (4 seeds, lr 0.001 to t = 5).",
            {**PAPER, "train.lr": 0.001, "train.steps": 5000, "seeds": list(range(4))}, study="init-scale",
        ),
        Experiment(
            "noise",
            "Token noise (Gaussian, on the one-hot inputs) and flipped labels at test time, for the model at T1 and at "
            "t = 100, trained fully and with attention frozen (only W and W_V train); GD lr 0.01, 4 seeds.",
            {**PAPER, "train.steps": 10000, "seeds": list(range(4))}, study="noise",
        ),
        Experiment(
            "markov",
            "Next-token prediction on a random 16-state Markov chain (Dirichlet(0.2) rows), L = 8, 6000 sequences, "
            "with the one-layer model and a fixed vocabulary readout; GD lr 2 to t = 4000, 4 seeds: loss against the "
            "entropy rate, and which weights move first.",
            {"data.d": 16, "data.L": 8, "data.n": 6000, "data.n_test": 3000, "model.m": 64, "model.m1": 128,
             "init.scheme": "kaiming", "train.method": "gd", "train.lr": 2.0, "train.steps": 2000,
             "seeds": [0, 1, 2, 3], "observe.points": 100}, study="markov",
        ),
        Experiment(
            "tiny",
            "A seconds-long smoke configuration: n=12, L=4, d=16, m=m1=8.",
            {"data.n": 12, "data.L": 4, "data.d": 16, "data.n_test": 24, "model.m": 8, "model.m1": 8,
             "train.lr": 0.1, "train.steps": 200, "observe.points": 30, "observe.chunks": 3},
        ),
    )
}


def get_experiment(name: str) -> Experiment:
    if name not in EXPERIMENTS:
        raise ConfigError(f"unknown experiment '{name}': choose one of {', '.join(EXPERIMENTS)} or pass a .toml file")
    return EXPERIMENTS[name]
