"""eq. (1)'s theorem (Yang et al., NeurIPS 2024) as one public declaration, `THEOREM`: the paper's claims
(`claims.CLAIMS`, each a `Statement`), the checks they name (`checks.CHECKS`, each a `Check`), its
premises P1..P10 (`premises.PREMISES`) and the per-seed quantities its rates fit (`scaling.QUANTITIES`),
declared with nothing but the public API of `coocflow.verify`, the API every System's theorem uses.
`Eq1System.theorem()` returns it.

Every check, seed premise and quantity reads one seed through `seed_view`: its series, its saved states
(initial, T1, final), the configuration's scales and the phase boundaries (`checks.SeedData`), built
once per seed from the run folder. `verify.judge` judges it as it judges any System's theorem; its
`report` hook (`render.paper_report`) shows the verdicts on a run as the paper's report (claims table,
per-check counts, P7 relaxed, Appendix C's closed forms: `verify.Verification`), which `verify_run`
returns; its `scaling` hook (`width_sweep.WidthSweep`) is its width sweep, `verify --scaling m|m1|both`.
"""

from __future__ import annotations

import dataclasses

from coocflow.storage import LoadedRun
from coocflow.verify.declare import Computed, SeedRun, Theorem
from coocflow.verify.paper.checks import CHECKS, SeedData
from coocflow.verify.paper.claims import CLAIMS, premises_of_check
from coocflow.verify.paper.premises import PREMISES
from coocflow.verify.paper.scaling import QUANTITIES
from coocflow.verify.paper.reading import seed_views
from coocflow.verify.paper.render import paper_report
from coocflow.verify.paper.verify import Verification, judged_run
from coocflow.verify.paper.width_sweep import WidthSweep


def seed_view(run: SeedRun) -> SeedData:
    """What eq. (1)'s checks, seed premises and quantities read of one seed (`checks.SeedData`), with the
    `[verify]` settings the judge read the run with (`run.config`)."""
    views = seed_views(run.folder, run.config.to_dict()["verify"])
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
    report=paper_report,
    scaling=WidthSweep(),
)


def verify_run(run: LoadedRun) -> Verification:
    """`THEOREM` on this run (`verify.judged_run`)."""
    return judged_run(THEOREM, run)
