"""What the commands that do not train need to know of a System, read without importing it.

Building a System imports JAX (1-3.6 s), so `coocflow ls`, `compare`, `report` and the checks at
the door read these instead: which page reports one of its runs, which columns
`compare` draws and which keys `ls` shows. Every System has the defaults (`Traits()`); the built-in
ones whose commands differ declare theirs in `BUILT_IN`. This module imports nothing of coocflow.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Traits:
    """One System's answers to the questions the read-only commands ask."""

    checked_by_config: bool = False
    """Its settings are `Config`'s own sections, which `Config` validates: nothing to build at the
    door. Otherwise the System is built there, so that it reads and checks its own settings before
    any folder exists."""
    run_page: str = "observables"
    """The report of one of its runs: "observables" (every observable over time) or "paper" (the
    phases, T1, Figure 1 and the Appendix C coordinates of eq. (1))."""
    compare_columns: tuple[str, ...] = ()
    """What `coocflow compare` draws without --columns; empty: each run's loss, then the first
    columns every run has, four in all."""
    listing_keys: tuple[str, ...] = ()
    """The config keys `coocflow ls` shows for a run's shape; empty: its own settings (else data.L
    and data.d)."""


EQ1 = Traits(checked_by_config=True, run_page="paper",
             compare_columns=("loss", "G_mu1", "A_mu1_mu2", "train_acc"),
             listing_keys=("data.n", "data.L", "data.d", "model.m", "model.m1"))
"""eq. (1): its settings are `Config`'s data, model and init sections; the paper's report
and headline quantities (the loss, G(mu_1), the score A[mu_1, mu_2], accuracy)."""

BUILT_IN: dict[str, Traits] = {"eq1": EQ1, "deep": Traits(), "markov": Traits()}


def traits_of(system: str) -> Traits:
    """The traits of the System a config names (`Config.system`); a user's `file.py:Class` has the
    defaults."""
    return BUILT_IN.get(system, Traits())
