"""Speed and memory benchmarks (`coocflow bench`, `benchmarks/bench.py`).

Each case runs in its own subprocess (so its peak RSS is its own), times the compiled path with
compilation excluded, measures a straightforward baseline in the same process, and prints the
ratio. Targets are the project's speed targets (2-core CPU); see benchmarks/README.md for what was tried.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

CASES = ("gd", "ensemble", "flow", "large", "process")
TARGETS = {
    "gd": ("us per step", 40.0),
    "ensemble": ("us per seed-step", 20.0),
    "flow": ("s wall to t = 1e6", 2.0),
    "large": ("fraction of matmul peak", 0.30),
}


def _timed(fn: Callable[[], object], repeat: int = 2) -> float:
    """Best wall time of `fn()` over `repeat` calls, after one warm-up call (compilation)."""
    jax.block_until_ready(fn())
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - start)
    return best


def _paper(seeds: int = 1, **overrides):
    from coocflow.api import resolve_config
    from coocflow.runner import build_ensemble

    config = resolve_config("paper", [f"{k}={v}" for k, v in overrides.items()], seed=0,
                            n_seeds=seeds if seeds > 1 else None)
    model, problem = build_ensemble(config)
    return config, model, problem


def _steps_fn(problem_train, frozen, lr: float, steps: int):
    """Our compiled path: a fori_loop of full-batch GD steps, vmapped over seeds."""
    from coocflow.model import trainable_loss

    grad_fn = jax.grad(trainable_loss)

    @jax.jit
    def run(params, frozen, data):
        def one_seed(params, frozen, data):
            def body(_, p):
                return jax.tree.map(lambda w, g: w - lr * g, p, grad_fn(p, frozen, data))
            return jax.lax.fori_loop(0, steps, body, params)
        return jax.vmap(one_seed)(params, frozen, data)

    return run


def _python_loop_baseline(trainable, frozen, data, lr: float, steps: int) -> float:
    """How most people first write it: a Python loop calling a jitted single step."""
    from coocflow.model import trainable_loss

    grad_fn = jax.grad(trainable_loss)

    @jax.jit
    def step(params):
        return jax.tree.map(lambda w, g: w - lr * g, params, grad_fn(params, frozen, data))

    params = step(trainable)
    jax.block_until_ready(params)
    start = time.perf_counter()
    for _ in range(steps):
        params = step(params)
    jax.block_until_ready(params)
    return (time.perf_counter() - start) / steps


def case_gd(quick: bool) -> dict:
    from coocflow.model import partition
    from coocflow.runner import unstack

    steps = 3000 if quick else 30000
    config, model, problem = _paper()
    trainable, frozen = partition(model)
    run = _steps_fn(problem.train, frozen, 0.01, steps)
    ours = _timed(lambda: run(trainable, frozen, problem.train), repeat=1) / steps
    baseline = _python_loop_baseline(unstack(trainable, 0), unstack(frozen, 0), unstack(problem.train, 0),
                                     0.01, min(steps, 3000))
    return {"value": ours * 1e6, "baseline": baseline * 1e6, "baseline_name": "Python loop of jitted steps",
            "ratio": baseline / ours, "detail": f"paper config, float64, {steps} full-batch GD steps"}


def case_ensemble(quick: bool) -> dict:
    from coocflow.model import partition

    steps, seeds = (200, 64) if quick else (1000, 64)
    _, model, problem = _paper(seeds=seeds)
    trainable, frozen = partition(model)
    run = _steps_fn(problem.train, frozen, 0.01, steps)
    ours = _timed(lambda: run(trainable, frozen, problem.train), repeat=1) / (steps * seeds)
    _, model1, problem1 = _paper()
    t1, f1 = partition(model1)
    single = _steps_fn(problem1.train, f1, 0.01, steps)
    baseline = _timed(lambda: single(t1, f1, problem1.train), repeat=1) / steps
    return {"value": ours * 1e6, "baseline": baseline * 1e6, "baseline_name": "one seed at a time (compiled)",
            "ratio": baseline / ours, "detail": f"{seeds} seeds vmapped, {steps} GD steps each"}


def case_flow(quick: bool) -> dict:
    from coocflow.api import resolve_config
    from coocflow.runner import train

    t_end = 1e4 if quick else 1e6
    overrides = ["train.method=flow", f"train.t_end={t_end}", "observe.chunks=1"]
    config = resolve_config("paper", overrides + ["train.rtol=1e-6", "train.atol=1e-9"])
    train(config)
    start = time.perf_counter()
    result = train(config)
    wall = time.perf_counter() - start
    tight = train(resolve_config("paper", overrides + ["train.rtol=1e-10", "train.atol=1e-13"]))
    error = float(np.max(np.abs(result.series["loss"] - tight.series["loss"]) / tight.series["loss"]))
    gd = case_gd(quick=True)["value"] * 1e-6
    gd_estimate = gd * t_end / 0.01
    evals = result.trajectory.stats["gradient_evaluations"][0]
    return {"value": wall, "baseline": gd_estimate, "baseline_name": "GD at lr 0.01 to the same t (estimated)",
            "ratio": gd_estimate / wall,
            "detail": f"{config.train.solver} rtol 1e-6 to t={t_end:g}: {evals} gradient evaluations, "
                      f"{result.trajectory.stats['num_steps'][0]} steps; max relative loss error vs "
                      f"rtol 1e-10: {error:.2e}; final loss {result.series['loss'][-1]:.3e}",
            "error": error}


def matmul_peak() -> float:
    """float64 GFLOP/s of a large square matrix product on this machine."""
    n = 2048
    a = jax.random.normal(jax.random.PRNGKey(0), (n, n), dtype=jnp.float64)
    f = jax.jit(lambda x: x @ x)
    seconds = _timed(lambda: f(a), repeat=3)
    return 2 * n**3 / seconds / 1e9


def case_large(quick: bool) -> dict:
    from coocflow.model import partition, trainable_loss

    steps = 5 if quick else 20
    config, model, problem = _paper(**{"data.n": 600, "data.L": 10, "data.d": 4603,
                                       "data.random_tokens": "distinct", "model.m": 512, "model.m1": 512})
    trainable, frozen = partition(model)
    run = _steps_fn(problem.train, frozen, 0.01, steps)
    per_step = _timed(lambda: run(trainable, frozen, problem.train), repeat=1) / steps
    grad = jax.jit(jax.grad(trainable_loss))
    from coocflow.runner import unstack
    args = (unstack(trainable, 0), unstack(frozen, 0), unstack(problem.train, 0))
    cost = grad.lower(*args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    flops = float(cost.get("flops", 0.0))
    achieved = flops / per_step / 1e9
    peak = matmul_peak()
    return {"value": achieved / peak, "baseline": peak, "baseline_name": "float64 matmul peak (GFLOP/s)",
            "ratio": achieved / peak,
            "detail": f"n=600 L=10 d=4603 distinct m=m1=512: {per_step * 1e3:.2f} ms/step, "
                      f"{flops / 1e6:.1f} MFLOP/step (XLA cost analysis), {achieved:.1f} GFLOP/s"}


PROCESS_COMMANDS = (
    # (label, arguments, target warm wall seconds, cold/warm measured)
    ("coocflow --help", ["--help"], 0.5, False),
    ("coocflow keys", ["keys"], 0.5, False),
    ("coocflow experiments", ["experiments"], 0.5, False),
    ("run tiny", ["run", "tiny", "--out", "runs/tiny", "--force"], 4.0, True),
    ("coocflow ls", ["ls"], 0.5, False),
    ("coocflow show", ["show", "runs/tiny"], 0.5, False),
    ("verify (finished tiny run)", ["verify", "runs/tiny"], 4.0, True),
    ("run paper", ["run", "paper", "--out", "runs/paper", "--force"], 12.0, True),
    ("flow to t = 1e6", ["run", "paper", "--set", "train.method=flow", "--set", "train.t_end=1e6",
                         "--out", "runs/flow", "--force"], 6.0, True),
)
"""Whole-process commands a user waits for, with their warm-cache targets (2-core CPU)."""


def _wall(args: list[str], cwd: str, cache: str) -> float:
    env = {**os.environ, "COOCFLOW_CACHE_DIR": cache, "COLUMNS": "120"}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "coocflow", *args], cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"coocflow {' '.join(args)} failed: {done.stderr.strip()[-300:]}")
    return wall


def case_process(quick: bool) -> list[dict]:
    """Each command as a whole process (imports, compilation or the persistent cache, training,
    figures, writing): cold (a new, empty compilation cache) once, then warm (the same cache)
    `repeat` times; the ratio is cold over warm, i.e. what the cache saves."""
    import tempfile

    repeat = 1 if quick else 3
    rows = []
    with tempfile.TemporaryDirectory(prefix="coocflow-bench-") as work:
        for label, args, target, cached in PROCESS_COMMANDS:
            if quick and label in ("run paper", "flow to t = 1e6"):
                continue
            cache = os.path.join(work, "cache-" + label.replace(" ", "-").replace("/", "-"))
            if label.startswith("verify"):
                cache = os.path.join(work, "cache-run-tiny-verify")
                _wall(["run", "tiny", "--out", "runs/tiny", "--force", "--no-figures"], work, cache)
            cold = _wall(args, work, cache) if cached else None
            if label.startswith("verify"):
                _wall(["run", "tiny", "--out", "runs/tiny", "--force", "--no-figures"], work, cache)
            warm = sorted(_wall(args, work, cache) for _ in range(repeat))[repeat // 2]
            rows.append({"case": f"process: {label}", "value": warm, "unit": "s wall (warm cache)", "target": target,
                         "met": warm <= target, "baseline": cold if cold is not None else float("nan"),
                         "baseline_name": "cold cache" if cached else "no compilation involved",
                         "ratio": cold / warm if cold else float("nan"), "peak_rss_mib": float("nan"),
                         "detail": f"median of {repeat} warm runs; cold {cold:.2f} s" if cold else f"median of {repeat}"})
    return rows


def run_case(name: str, quick: bool) -> list[dict]:
    if name == "process":
        return case_process(quick)
    result = {"gd": case_gd, "ensemble": case_ensemble, "flow": case_flow, "large": case_large}[name](quick)
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["case"] = name
    unit, target = TARGETS[name]
    result.update(unit=unit, target=target, met=result["value"] >= target if name == "large" else result["value"] <= target)
    return [result]


def run_all(cases: tuple[str, ...] = CASES, quick: bool = False) -> list[dict]:
    """Each case in a fresh subprocess, so peak memory is per case."""
    results = []
    for name in cases:
        done = subprocess.run([sys.executable, "-m", "coocflow.bench", name] + (["--quick"] if quick else []),
                              capture_output=True, text=True)
        if done.returncode != 0:
            results.append({"case": name, "error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"})
            continue
        results.extend(json.loads(done.stdout.strip().splitlines()[-1]))
    return results


if __name__ == "__main__":
    import coocflow  # noqa: F401  (float64)

    print(json.dumps(run_case(sys.argv[1], "--quick" in sys.argv)))
