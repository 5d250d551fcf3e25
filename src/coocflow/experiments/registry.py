"""The registry of named experiments.

An experiment is a base configuration (dotted overrides of the defaults) and a description.
`paper` is the paper's experiment as stated (docs/definitions.md section 5); `paper-phenomena`
is the nearest setting in which the paper's Figure 1 phenomena are visible (see docs/findings.md for
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
    scaling_c0: tuple[float, ...] = ()
    """... and these init scales c0 as a second axis (each a whole width sweep; default the base c0)."""
    scaling_m1: tuple[int, ...] = ()
    """`--scaling m1` without --values runs these neuron counts (default: `scaling_widths`) ..."""
    scaling_m1_at: int | None = None
    """... at this width m (unless --set model.m=...): one where P1 holds at the largest m1."""

    def config(self) -> Config:
        return Config(name=self.name).replace(self.overrides)


PAPER = {
    "data.n": 60, "data.L": 5, "data.d": 64, "data.random_tokens": "uniform",
    "model.m": 128, "model.m1": 256, "init.scheme": "kaiming",
    "train.method": "gd", "optimizer.lr": 0.01, "train.steps": 30000,
}

THEORY_WIDTHS = (32768, 49667, 75281, 114105, 172951, 262144, 397336, 602249, 912838, 1383604, 2097152, 3178688,
                 4817990, 7302707, 11068835, 16777216)
"""16 widths from 2^15 to 2^24, evenly spaced in log m: the smallest is the first where m1 = 64 neurons
meet P1 (m >= 10 m1 log^2(m1/delta)); power of the rate test at this design: docs/power.md."""
THEORY_NEURONS = (64, 91, 128, 181, 256, 362, 512, 724, 1024)
"""The m1 axis: 9 neuron counts 2^6..2^10, evenly spaced in log m1, at m = 2^24. The
smallest is the first power of two above Cond. 1's m1 >= 8 log(4/delta) = 35 (`premises.min_neurons`); at
the largest, m / (m1 log^2(m1/delta)) = 170 >> 10 (P1). The flow's cost grows as m1^2 (the Gram state)."""
THEORY = {
    "data.n": 96, "data.L": 3, "data.d": 67, "data.random_tokens": "distinct", "data.n_test": 96,
    "model.m": THEORY_WIDTHS[0], "model.m1": 64, "model.space": "gram", "model.neurons": True,
    "init.scheme": "theory", "init.c0": 0.02, "init.c1": 1.0,
    "train.method": "flow", "solver.name": "tsit5", "train.t_end": 50.0 * THEORY_WIDTHS[0],
    "observe.points": 200, "observe.chunks": 2, "verify.c_t1": 20.0, "verify.loss_exponent": 2.0,
    "verify.sandwich_c": 0.1,
}
"""Premises (docs/claims.md section 1) at m = 2^15, m1 = 64: m/(m1 log^2(m1/delta)) = 10.0, m1 >= 8 log(4/delta)
= 35 (L. D.6), m/L^2 = 3641, m1/m = 1/512, n/L^2 = 10.7, d - 3 = 64 random slots all distinct, Fmax0 within
L. D.8's own bound (P7r; the paper's literal Fmax0 <= 0.01, P7, needs c0 c1 <~ 1e-3 and is not met). The paper's times are declared before any run: T1 = C_T1/U0 with C_T1 = 20 (Lemma 4.1:
dG(mu1)/dt ~ W0/6 ~ U0/6 brings G(mu1) to order one by about 6/U0; 20 leaves room), T* = first loss
<= m^-2, T0.5 where Lemma 4.3's sandwich with C = 0.1 sets in (C <= 1/3, typo 12). The flow observes from 0.01/U0 (Phase 1 resolved at every width) to 50 m (past T* ~ 14 m), in two
chunks (a width is the sweep's unit of resumption; 25 chunks cost 11 s of 23 s per 8-seed width, measured)."""

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
            {**PAPER, "init.c1": 0.01, "optimizer.lr": 0.001, "train.steps": 300000},
        ),
        Experiment(
            "theory",
            "The theory's regime, every premise of docs/claims.md met but the literal P7 (Fmax0 <= 0.01; L. D.8's own "
            "bound, P7r, is met): distinct random tokens with n L <= d "
            "(n=96, L=3, d=67), Gaussian Condition 1 init (c0=0.02, c1=1), m=2^15 >> m1=64 neurons (resolved in the "
            "Gram space) and L^2, the flow from 0.01/U0 to 50 m (past T* = first loss <= m^-2), T1 = 20/U0 declared.",
            THEORY, scaling_widths=THEORY_WIDTHS, scaling_seeds=8, scaling_c0=(0.02, 0.063, 0.2),
            scaling_m1=THEORY_NEURONS, scaling_m1_at=THEORY_WIDTHS[-1],
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
            {**PAPER, "system": "deep", "model.m": 64, "model.m1": 128, "model.layers": 2, "model.heads": 4,
             "train.method": "adam",
             "optimizer.lr": 0.0001, "train.steps": 600, "seeds": list(range(4)), "observe.points": 80},
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
            {**PAPER, "optimizer.lr": 0.001, "train.steps": 5000, "seeds": list(range(4))}, study="init-scale",
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
            {"system": "markov", "data.d": 16, "data.L": 8, "data.n": 6000, "data.n_test": 3000, "model.m": 64,
             "model.m1": 128,
             "init.scheme": "kaiming", "train.method": "gd", "optimizer.lr": 2.0, "train.steps": 2000,
             "seeds": [0, 1, 2, 3], "observe.points": 100}, study="markov",
        ),
        Experiment(
            "tiny",
            "A seconds-long smoke configuration: n=12, L=4, d=16, m=m1=8.",
            {"data.n": 12, "data.L": 4, "data.d": 16, "data.n_test": 24, "model.m": 8, "model.m1": 8,
             "optimizer.lr": 0.1, "train.steps": 200, "observe.points": 30, "observe.chunks": 3},
        ),
    )
}


def get_experiment(name: str) -> Experiment:
    if name not in EXPERIMENTS:
        raise ConfigError(f"unknown experiment {name!r}: choose one of {', '.join(EXPERIMENTS)} or pass a .toml file")
    return EXPERIMENTS[name]
