"""Wrote tests/data/format1 at commit 5f236ea, the last of config format 1 (kept as the record of how):
`python make_format1.py OUT` with that commit installed."""
import shutil, sys
from pathlib import Path
import jax
jax.config.update("jax_enable_x64", True)
from coocflow.api import resolve_config, run_and_write
from coocflow.storage.checkpoint import RunCheckpoint

out = Path(sys.argv[1])
shutil.rmtree(out, ignore_errors=True)
out.mkdir(parents=True)
TINY = {"data.n": 12, "data.L": 4, "data.d": 16, "data.n_test": 24, "model.m": 8, "model.m1": 8,
        "train.lr": 0.1, "train.steps": 200, "observe.points": 30, "observe.chunks": 3}
run_and_write(resolve_config("tiny", {"seeds": [0, 1]}), out / "run-gd", figures=False)

class Killed(Exception):
    pass
original = RunCheckpoint.save
def save_then_die(self, state, n_obs, now=False):
    original(self, state, n_obs, now)
    if self.path.exists():
        raise Killed
RunCheckpoint.save = save_then_die
flow = resolve_config("tiny", {"train.method": "flow", "train.t_end": 15.0, "train.solver": "tsit5",
                               "observe.checkpoint_every_s": 0, "seeds": [0, 1]})
try:
    run_and_write(flow, out / "run-flow-killed", figures=False)
except Killed:
    pass
else:
    raise SystemExit("the flow run was not interrupted")
RunCheckpoint.save = original
run_and_write(flow, out / "run-flow-uninterrupted", figures=False)
for lock in out.rglob(".lock"):
    lock.unlink()
# The sweep: `coocflow sweep sweep-lr.toml --out OUT/sweep-killed`, then the job train.lr=0.1 removed
# (jobs/train.lr=0.1, table/*/train.lr=0.1.parquet, figures/), as if the sweep were killed before it.
