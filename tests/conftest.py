import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JAX_CACHE = REPO / ".pytest_cache" / "jax-compilation"
"""Compiled programs are shared through JAX's persistent cache by the xdist workers, the CLI
subprocesses and the sweep's worker and Ray processes the tests start (they inherit the
environment), so each distinct program compiles once per suite run."""
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(JAX_CACHE))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
"""Every program is cached, the tiny eager ones too (as coocflow.runtime does for users): a cold
suite compiled 6,685 programs in its 172 processes, about 220 s of its 736 s of compiling in small
eager operations (broadcasts, slices, stacks) that each new process compiled again (measured with
JAX's compile log, 2026-12-02; tests/test_interrupts.py and test_cli.py: 91 s -> 86 s)."""
SUITE_XLA_FLAGS = "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"
os.environ.setdefault("XLA_FLAGS", SUITE_XLA_FLAGS)
"""The suite's programs are tiny: compiling them without LLVM's optimizations saves about a fifth
of the suite's time (measured: 76 s -> 61 s on the generalization smoke test), and XLA's older
elemental emitter for fusions instead of its MLIR fusion emitters compiles in about half the time
at that level (XLA compile time of a theory flow and a tiny GD run, cache off: 11.6 s -> 6.5 s;
tests/test_golden.py, test_gram.py, test_gradients.py and test_flow.py, cold cache: 72.8 s -> 54.6 s;
measured 2026-12-04, 2 cores). Numerics are unchanged to a few ulps (no fast-math either way; the
emitter leaves the paper's 30,000 GD steps bit for bit and moves the theory flow by 3.9e-12 of a
column's scale, the paper's flow at rtol 1e-6 by 3.8e-8, against 6.6e-7 for the optimization level
alone; so tests/test_references.py checks the stored references with XLA's default flags) and the
golden files still match to 1e-10."""

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)

import coocflow  # noqa: E402,F401  (enables float64 for the whole suite)

GOLDEN_DIR = REPO / "tests" / "golden"
"""The golden files: datasets, weights and the exact float64 values of the model's outputs,
gradients and gradient-descent steps (docs/definitions.md, "Golden files")."""
GOLDEN_NAMES = ("tiny", "small")


def load_golden(name: str) -> dict[str, np.ndarray]:
    path = GOLDEN_DIR / f"{name}.npz"
    assert path.is_file(), f"golden file {path} is missing from the repository"
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


@pytest.fixture(params=GOLDEN_NAMES)
def golden(request):
    return load_golden(request.param)


TINY = {
    "data.n": 12, "data.L": 4, "data.d": 16, "data.n_test": 24, "model.m": 8, "model.m1": 8,
    "optimizer.lr": 0.1, "train.steps": 200, "observe.points": 30, "observe.chunks": 3,
}


SLOWEST_FIRST = (
    "test_sweep.py", "test_api_parity.py", "test_verify.py", "test_neuron_gram.py", "test_interrupts.py",
    "test_references.py", "test_scaling.py", "test_training.py", "test_gram_runs.py", "test_deep.py",
    "test_systems.py", "test_studies.py", "test_fit_rate.py", "test_cli.py", "test_events.py", "test_theorems.py",
    "test_flow.py", "test_figures.py", "test_gram.py", "test_report.py", "test_experiments.py", "test_markov.py",
)
"""Test files by their measured cost, most expensive first (sum of their tests' durations in two
runs of the suite on 2 cores, 2026-12-03: test_sweep.py 157-179 s down to about 30 s); the others
follow in the order pytest collects them. With `--no-loadscope-reorder` (the Makefile) xdist hands
whole files to its workers in this order; by default it orders them by their number of tests,
which puts the single minute-long test of test_references.py near the end. Replaying those two
runs' file durations on two workers: the busier worker's total 729 -> 716 s and 696 -> 680 s,
against 714 s and 679 s for a perfect split (the suite's wall time drifts by more than that from
hour to hour on this machine, so the replay is the measurement)."""


def coocflow_here(*args, cwd: Path | None = None):
    """`coocflow ARGS` run in this process (`coocflow.cli.invoke`), its output captured: what the
    executable prints and its exit code, without a new process importing JAX again (about 1.5 s
    each). Tests of what only a process shows (signals, the fast exit, the terminal's width) start
    the executable instead."""
    import contextlib
    import io
    import subprocess

    from coocflow.cli import invoke

    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd or Path.cwd()), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = invoke([str(arg) for arg in args])
    return subprocess.CompletedProcess(["coocflow", *args], code, out.getvalue(), err.getvalue())


def width_scaling(config, axis: str, values: list[int], out: Path, c0_values: tuple[float, ...] = ()) -> dict:
    """eq. (1)'s width sweep of `config` into `out` as `verify --scaling` makes it (its theorem's `scaling`
    hook plans the runs; `api.ensure_run` trains, reuses or resumes each), measured and judged: the
    record scaling.json holds, before it is written (with the C_T1 re-judgings it keeps apart)."""
    from coocflow.api import ensure_run
    from coocflow.verify.paper.theorem import THEOREM
    from coocflow.verify.paper.width_sweep import width_plan, width_report

    plan = width_plan(config, axis, values, c0_values)
    runs = THEOREM.scaling.runs(plan, out)
    for run in runs:
        ensure_run(run.config, run.folder)
    return width_report(THEOREM, plan, runs)


def pytest_collection_modifyitems(config, items):
    rank = {name: k for k, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: each file keeps its order
