"""The registry of named experiments.

An experiment is a base configuration (dotted overrides of the defaults) and a description.
`paper` is SPEC section 5 as stated; `paper-phenomena` is the nearest setting in which the
paper's Figure 1 phenomena are visible (see the README for what differs and why).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from coocflow.config import Config
from coocflow.errors import ConfigError


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str
    overrides: dict[str, Any] = field(default_factory=dict)

    def config(self) -> Config:
        return Config(name=self.name).replace(self.overrides)


PAPER = {
    "data.n": 60, "data.L": 5, "data.d": 64, "data.random_tokens": "uniform",
    "model.m": 128, "model.m1": 256, "init.scheme": "kaiming",
    "train.method": "gd", "train.lr": 0.01, "train.steps": 30000,
}

EXPERIMENTS: dict[str, Experiment] = {
    e.name: e
    for e in (
        Experiment(
            "paper",
            "SPEC section 5 as stated: n=60 (30/10/10/10), L=5, d=64, m=128, m1=256, Kaiming init, "
            "GD with lr 0.01 for 30000 steps (t = 300).",
            PAPER,
        ),
        Experiment(
            "paper-phenomena",
            "The paper's setting with the small initialization of its theory (Condition 1), under "
            "which Figure 1's I2/I3 rise in Phase 1 and the Phase-2 score movements are visible.",
            {**PAPER, "init.scheme": "theory", "init.c0": 1.0, "init.c1": 1.0},
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
