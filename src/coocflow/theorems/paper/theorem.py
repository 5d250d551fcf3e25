"""eq. (1)'s theorem (Yang et al., NeurIPS 2024) as one public declaration, `THEOREM`: the paper's claims
(`claims.CLAIMS`, each a `Statement`), the checks they name (`checks.CHECKS`, each a `Check`), its
premises P1..P10 (`premises.PREMISES`) and the per-seed quantities its rates fit (`scaling.QUANTITIES`),
declared with nothing but the public API of `coocflow.theorems`, the API every System's theorem uses.
`Eq1System.theorem()` returns it.

Every check, seed premise and quantity reads one seed through `seed_view`: its series, its saved states
(initial, T1, final), the configuration's scales and the phase boundaries (`checks.SeedData`), built
once per seed from the run folder. `coocflow verify` reports this theorem through
`theorems.paper.verify` (per-check counts, P7 relaxed, Appendix C's closed forms, the width sweep's
strata); `theorems.judge.verify_theorem` judges the same declaration as it judges any System's
(tests/test_eq1_theorem.py: the two agree on every check).
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from pathlib import Path

from coocflow.storage.folders import RunFolder
from coocflow.storage.run_folder import load_run
from coocflow.theorems.declare import Computed, SeedRun, Theorem
from coocflow.theorems.paper.checks import CHECKS, SeedData
from coocflow.theorems.paper.claims import CLAIMS, premises_of_check
from coocflow.theorems.paper.premises import PREMISES
from coocflow.theorems.paper.scaling import QUANTITIES
from coocflow.theorems.paper.verify import seed_data


@lru_cache(maxsize=2)
def _seed_views(folder: str, written_ns: int) -> dict[int, SeedData]:
    """Every seed's view of a run folder (keyed by when its manifest was written, so a rewritten folder
    is read again)."""
    return {seed: data for seed, data in seed_data(load_run(Path(folder)))}


def seed_view(run: SeedRun) -> SeedData:
    """What eq. (1)'s checks, seed premises and quantities read of one seed (`checks.SeedData`)."""
    views = _seed_views(str(run.folder), RunFolder(run.folder).manifest_file.stat().st_mtime_ns)
    if run.seed not in views:
        raise ValueError(f"seed {run.seed} has no valid observation (it diverged at t = 0)")
    return views[run.seed]


def _with_premises(check):
    """A check with the premises its verdict depends on: those of the claims it tests, none where it is
    an identity (`claims.premises_of_check`)."""
    return dataclasses.replace(check, premises=premises_of_check(check.id))


THEOREM = Theorem(
    name="Yang et al. (NeurIPS 2024): training dynamics of a one-layer transformer on word co-occurrence",
    source="Training Dynamics of Transformers to Recognize Word Co-occurrence via Gradient Flow Analysis, "
           "Theorems 3.1-3.3 and the lemmas of Appendices D-F (docs/claims.md)",
    claims=(*(_with_premises(check) for check in CHECKS.values()), *CLAIMS),
    premises=PREMISES,
    quantities={name: Computed(q.fn, q.label) for name, q in QUANTITIES.items()},
    reads=seed_view,
)
