"""Every verdict and value `coocflow verify` gives on a fixed set of small runs and a three-width
sweep, as one JSON file: `python tests/reference/verdict_snapshot.py OUT.json` at two commits, then
`python tests/reference/verdict_diff.py A.json B.json` says whether a change moved any verdict and
by how much the numbers moved (used when the checks moved onto `SavedState`).
The runs are trained once into /tmp/coocflow-verdicts and reused."""
import json, sys
from pathlib import Path
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
from coocflow.api import resolve_config, run_and_write
from coocflow.storage import load_run
from coocflow.verify.paper.theorem import verify_run
try:  # the width sweep as eq. (1)'s theorem's scaling hook
    from coocflow.api import ensure_run
    from coocflow.verify.paper.theorem import THEOREM
    from coocflow.verify.paper.width_sweep import width_plan, width_report

    def width_scaling(config, axis, values, out):
        plan = width_plan(config, axis, values)
        runs = THEOREM.scaling.runs(plan, out)
        for run in runs:
            ensure_run(run.config, run.folder)
        return width_report(THEOREM, plan, runs)
except ImportError:  # before it (a snapshot of an older commit)
    from coocflow.sweep.width import width_scaling

ROOT = Path("/tmp/coocflow-verdicts")
TINY = {"data.n": 12, "data.L": 4, "data.d": 16, "data.n_test": 24, "model.m": 8, "model.m1": 8,
        "optimizer.lr": 0.1, "train.steps": 200, "observe.points": 30, "observe.chunks": 3}
THEORY_TINY = {**TINY, "init.scheme": "theory", "init.c0": 0.004}
RUNS = {
    "tiny-gd": ("paper", TINY, 3),
    "tiny-mlp-value": ("paper", {**TINY, "train.trainable": "mlp-value"}, 2),
    "theory-weights": ("paper", {**THEORY_TINY, "model.m": 64, "model.m1": 16, "optimizer.lr": 0.01, "train.steps": 3000,
                                 "observe.snapshots": [0.5, 5.0]}, 2),
    "theory-gram-neurons": ("paper", {**THEORY_TINY, "model.space": "gram", "model.neurons": True, "model.m": 64,
                                      "model.m1": 16, "train.method": "flow", "train.t_end": 40.0}, 2),
    "theory-preset-small": ("theory", {"data.n": 24, "data.d": 40, "observe.points": 60, "observe.chunks": 1,
                                       "model.m": 256, "model.m1": 16}, 2),
}

def clean(x):
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    if isinstance(x, (np.floating, float)):
        return float(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.ndarray):
        return clean(x.tolist())
    return x

out = {}
for name, (exp, overrides, seeds) in RUNS.items():
    folder = ROOT / name
    if not (folder / "manifest.json").exists():
        run_and_write(resolve_config(exp, overrides, n_seeds=seeds), folder, force=True, figures=False)
    run = load_run(folder)
    v = verify_run(run)
    out[name] = clean(v.to_dict())
config = resolve_config("theory", ["data.n=24", "data.d=40", "observe.points=60", "observe.chunks=1"], n_seeds=2)
report = width_scaling(config, "both", [256, 512, 1024], ROOT / "scaling")
out["scaling"] = clean(report)
Path(sys.argv[1]).write_text(json.dumps(out, indent=1, sort_keys=True, default=str))
print("written", sys.argv[1], {k: len(json.dumps(v)) for k, v in out.items()})
