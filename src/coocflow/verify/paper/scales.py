"""The scales of docs/claims.md's shorthand (v0, U0, W0, G0, Cs, Cr, eps_m), computed from a run's
configuration, and a run folder's stacked states split into one dict per seed: what the premises,
the checks and the width scaling share."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Scales:
    """Theory-equivalent init scales of a configuration (docs/claims.md shorthand): init stds s0 of
    W_Q, W_K, W_V and s1 of W, c0 = s0 sqrt(Lm), c1 = s1 sqrt(m1)."""

    s0: float
    s1: float
    c0: float
    c1: float
    m: int
    m1: int
    d: int
    n: int
    L: int

    @property
    def v0(self) -> float:
        """s0^2 m: the scale of ||W_V mu||^2 and ||W_K mu||^2 at t = 0."""
        return self.s0**2 * self.m

    @property
    def U0(self) -> float:
        """s1^2 m m1: the scale of ||u||^2 (Eq. (5))."""
        return self.s1**2 * self.m * self.m1

    @property
    def W0(self) -> float:
        """(s0^2 + s1^2) m m1 = U0 + m1 v0: Lemma 4.1's rate of G(mu_1), G(mu_2)."""
        return self.U0 + self.m1 * self.v0

    @property
    def G0(self) -> float:
        """s0 s1 sqrt(m m1): the scale of |G(mu)| at t = 0."""
        return self.s0 * self.s1 * math.sqrt(self.m * self.m1)

    @property
    def Cs(self) -> float:
        """Theorem 3.3's target score change v0/(sqrt(m) L U0) + s0^2/U0."""
        return self.v0 / (math.sqrt(self.m) * self.L * self.U0) + self.s0**2 / self.U0

    @property
    def Cr(self) -> float:
        """Theorem 3.3's bound on random-token score changes v0/(n sqrt(m) L U0) + s0^2/U0."""
        return self.v0 / (self.n * math.sqrt(self.m) * self.L * self.U0) + self.s0**2 / self.U0


def scales_of(config: dict) -> Scales:
    """The scales of a resolved configuration (its dict form). Kaiming uniform has variance
    1/(3 fan_in): s0 = c0_cfg/sqrt(3d), s1 = c1_cfg/sqrt(3m)."""
    data, model, init = config["data"], config["model"], config["init"]
    n, L, d, m, m1 = data["n"], data["L"], data["d"], model["m"], model["m1"]
    if init["scheme"] == "theory":
        s0, s1 = init["c0"] / math.sqrt(L * m), init["c1"] / math.sqrt(m1)
    else:
        s0, s1 = init["c0"] / math.sqrt(3 * d), init["c1"] / math.sqrt(3 * m)
    return Scales(s0=s0, s1=s1, c0=s0 * math.sqrt(L * m), c1=s1 * math.sqrt(m1), m=m, m1=m1, d=d, n=n, L=L)


def eps_m(x: float, m: int) -> float:
    """eps_m(x) = sqrt(4 log(x)/m) + 4 log(x)/m (L. D.1)."""
    r = 4 * math.log(x) / m
    return math.sqrt(r) + r
