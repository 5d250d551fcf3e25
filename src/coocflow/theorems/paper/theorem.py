"""eq. (1)'s theorem (Yang et al., NeurIPS 2024) as one public declaration, `THEOREM`: the paper's claims
(`claims.CLAIMS`, each a `Statement`), the checks they name (`checks.CHECKS`, each a `Check`), its
premises P1..P10 (`premises.PREMISES`) and the per-seed quantities its rates fit (`scaling.QUANTITIES`),
declared with nothing but the public API of `coocflow.theorems`, the API every System's theorem uses.
`Eq1System.theorem()` returns it.

Every check, seed premise and quantity reads one seed through `seed_view`: its series, its saved states
(initial, T1, final), the configuration's scales and the phase boundaries (`checks.SeedData`), built
once per seed from the run folder. `theorems.judge` judges it as it judges any System's theorem;
`theorems.paper.verify` renders its verdicts on a run as the paper's report (claims table, per-check
counts, P7 relaxed, Appendix C's closed forms).
"""

from __future__ import annotations

import dataclasses
import json
from functools import lru_cache
from pathlib import Path

from coocflow.storage.folders import RunFolder
from coocflow.storage.run_folder import load_run
from coocflow.theorems.declare import Computed, SeedRun, Theorem
from coocflow.theorems.paper.checks import CHECKS, SeedData
from coocflow.theorems.paper.claims import CLAIMS, premises_of_check
from coocflow.theorems.paper.premises import PREMISES
from coocflow.theorems.paper.scaling import QUANTITIES
from coocflow.theorems.paper.reading import seed_data


@lru_cache(maxsize=2)
def _seed_views(folder: str, written_ns: int, verify_json: str) -> dict[int, SeedData]:
    """Every seed's view of a run folder read with the `[verify]` settings `verify_json` (keyed by when
    its manifest was written, so a rewritten folder is read again)."""
    run = load_run(Path(folder))
    run = dataclasses.replace(run, config={**run.config, "verify": json.loads(verify_json)})
    return {seed: data for seed, data in seed_data(run)}


def seed_views(folder: Path, verify: dict | None = None) -> dict[int, SeedData]:
    """Every seed's view of a run folder by seed (read once while the folder is unchanged), read with the
    `[verify]` settings `verify` (None: the folder's own); a seed with no valid observation (it diverged
    at t = 0) has none."""
    if verify is None:
        verify = RunFolder(folder).config().to_dict()["verify"]
    return _seed_views(str(folder), RunFolder(folder).manifest_file.stat().st_mtime_ns,
                       json.dumps(verify, sort_keys=True))


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
)
