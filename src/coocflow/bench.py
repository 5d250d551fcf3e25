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
import tempfile
import time
from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from coocflow.api import resolve_config
from coocflow.flow.trajectory import seed_groups
from coocflow.model import partition, trainable_loss
from coocflow.model.gram import gram_gd_step, gram_velocity
from coocflow.model.state import split, velocity
from coocflow.run import train
from coocflow.run.eq1 import build_ensemble, unstack
from coocflow.systems.eq1 import build_model, build_problem
from coocflow.storage.folders import RunFolder, ScalingFolder

CASES = ("gd", "ensemble", "flow", "large", "process", "gram", "gram-wide", "scaling")
TARGETS = {
    "gd": ("us per step", 40.0),
    "ensemble": ("x one seed's throughput", 1.8),
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
    config = resolve_config("paper", [f"{k}={v}" for k, v in overrides.items()], seed=0,
                            n_seeds=seeds if seeds > 1 else None)
    model, problem = build_ensemble(config)
    return config, model, problem


def _steps_fn(lr: float, steps: int):
    """A bare compiled loop of the same GD step (a fori_loop of full-batch steps, vmapped over seeds),
    without the driver's observations, chunks and checks: the floor the product's loop is compared with."""
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


def product_step_seconds(config, short: int, long: int, repeat: int = 2) -> float:
    """Wall seconds a step of the training loop `coocflow run` trains with (`run.train`: the seeds
    built, the chunked driver with its observations, divergence watch and seed groups), per step of
    the ensemble: warm trainings of `long` and `short` steps (each the best of `repeat` calls after a
    first that compiles) and their difference over `long - short`, so that what does not grow with
    the steps (building the seeds, the observation grid's points) cancels. `short` must be at least
    `observe.points`, so that both observe as often."""
    if short < config.observe.points:
        raise ValueError(f"short = {short} steps observe fewer than observe.points = {config.observe.points} times")

    def seconds(steps: int) -> float:
        stepped = config.replace({"train.steps": steps})
        return _timed(lambda: train(stepped).series, repeat=repeat)

    return (seconds(long) - seconds(short)) / (long - short)


def case_gd(quick: bool) -> dict:
    """The paper's configuration trained by GD as `coocflow run paper` trains it, us per step."""
    steps = 3000 if quick else 30000
    config, model, problem = _paper()
    ours = product_step_seconds(config, steps // 10, steps, repeat=1 if quick else 2)
    trainable, frozen = partition(model)
    bare = _timed(lambda: _steps_fn(0.01, steps)(trainable, frozen, problem.train),
                  repeat=1) / steps
    baseline = _python_loop_baseline(unstack(trainable, 0), unstack(frozen, 0), unstack(problem.train, 0),
                                     0.01, min(steps, 3000))
    return {"value": ours * 1e6, "baseline": baseline * 1e6, "baseline_name": "Python loop of jitted steps",
            "ratio": baseline / ours,
            "detail": f"paper config, float64, full-batch GD, the product's training loop ({steps} against "
                      f"{steps // 10} steps); a bare fori_loop of the same step: {bare * 1e6:.0f} us"}


def case_ensemble(quick: bool) -> dict:
    """An ensemble's throughput against one seed's, both trained by the product's loop (which splits
    the seeds into one group per core, each a vmapped call, the groups in concurrent threads); for
    comparison, a bare single vmapped call of all seeds."""
    steps, seeds = (4000, 8) if quick else (16000, 8)
    config, model, problem = _paper(seeds=seeds)
    ours = product_step_seconds(config, steps // 16, steps) / seeds
    single = product_step_seconds(config.replace({"seeds": [config.seed]}), steps // 16, steps)
    trainable, frozen = partition(model)
    run = _steps_fn(0.01, steps)
    one_call = _timed(lambda: run(trainable, frozen, problem.train), repeat=2) / (steps * seeds)
    groups = len(seed_groups(seeds))
    return {"value": single / ours, "unit": "x one seed's throughput", "baseline": single * 1e6,
            "baseline_name": "one seed (us per step)", "ratio": single / ours,
            "detail": f"{seeds} seeds, {steps} GD steps, the product's training loop: {groups} groups in threads "
                      f"{ours * 1e6:.0f} us per seed-step, one seed {single * 1e6:.0f}; a bare single vmapped call "
                      f"of all seeds {one_call * 1e6:.0f} ({single / one_call:.2f}x)"}


def case_flow(quick: bool) -> dict:
    t_end = 1e4 if quick else 1e6
    overrides = ["train.method=flow", f"train.t_end={t_end}", "observe.chunks=1"]
    config = resolve_config("paper", overrides + ["solver.rtol=1e-6", "solver.atol=1e-9"])
    train(config)
    start = time.perf_counter()
    result = train(config)
    wall = time.perf_counter() - start
    tight = train(resolve_config("paper", overrides + ["solver.rtol=1e-10", "solver.atol=1e-13"]))
    error = float(np.max(np.abs(result.series["loss"] - tight.series["loss"]) / tight.series["loss"]))
    gd = case_gd(quick=True)["value"] * 1e-6
    gd_estimate = gd * t_end / 0.01
    evals = result.trajectory.stats["gradient_evaluations"][0]
    return {"value": wall, "baseline": gd_estimate, "baseline_name": "GD at lr 0.01 to the same t (estimated)",
            "ratio": gd_estimate / wall,
            "detail": f"{config.solver.name} rtol 1e-6 to t={t_end:g}: {evals} gradient evaluations, "
                      f"{result.trajectory.stats['num_steps'][0]} steps; max relative loss error vs "
                      f"rtol 1e-10: {error:.2e}; final loss {result.series['loss'][-1]:.3e}",
            "max_loss_error": error}


def matmul_peak() -> float:
    """float64 GFLOP/s of a large square matrix product on this machine."""
    n = 2048
    a = jax.random.normal(jax.random.PRNGKey(0), (n, n), dtype=jnp.float64)
    f = jax.jit(lambda x: x @ x)
    seconds = _timed(lambda: f(a), repeat=3)
    return 2 * n**3 / seconds / 1e9


def case_large(quick: bool) -> dict:
    steps = 12 if quick else 40
    config, model, problem = _paper(**{"data.n": 600, "data.L": 10, "data.d": 4603,
                                       "data.random_tokens": "distinct", "model.m": 512, "model.m1": 512,
                                       "observe.points": 2})
    trainable, frozen = partition(model)
    per_step = product_step_seconds(config, max(2, steps // 4), steps)
    bare = _timed(lambda: _steps_fn(0.01, steps)(trainable, frozen, problem.train),
                  repeat=1) / steps
    grad = jax.jit(jax.grad(trainable_loss))
    args = (unstack(trainable, 0), unstack(frozen, 0), unstack(problem.train, 0))
    cost = grad.lower(*args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    flops = float(cost.get("flops", 0.0))
    achieved = flops / per_step / 1e9
    peak = matmul_peak()
    return {"value": achieved / peak, "baseline": peak, "baseline_name": "float64 matmul peak (GFLOP/s)",
            "ratio": achieved / peak,
            "detail": f"n=600 L=10 d=4603 distinct m=m1=512, the product's training loop: {per_step * 1e3:.2f} ms/step "
                      f"(a bare fori_loop of the same step {bare * 1e3:.2f}), "
                      f"{flops / 1e6:.1f} MFLOP/step (XLA cost analysis), {achieved:.1f} GFLOP/s"}


GRAM_WIDTHS = (32, 128, 1024, 8192, 65536, 1_000_000)
WEIGHT_WIDTH_LIMIT = 8192
"""Weight space is timed up to m = m1 = 8192 (W alone is 67 M entries there); the Gram space at
every width, since its state does not grow with m."""


def _step_us(config, space: str, repeat: int) -> tuple[float, float]:
    """(GD step, flow right-hand side) in us for one seed of `config` in `space`."""
    config = config.replace({"model.space": space})
    state, data = build_model(config), build_problem(config).train
    moving, fixed = split(state)
    rhs = jax.jit(lambda s: velocity(s, fixed, data))
    if space == "gram":
        step = jax.jit(lambda s: gram_gd_step(s, data, 0.01))
    else:
        step = jax.jit(lambda s: jax.tree.map(lambda w, v: w + 0.01 * v, s, velocity(s, fixed, data)))
    return _timed(lambda: step(moving), repeat) * 1e6, _timed(lambda: rhs(moving), repeat) * 1e6


def case_gram(quick: bool) -> list[dict]:
    """The Gram space against weight space over widths: time per GD step and per flow
    right-hand side, the crossover width, and the Gram space's cost at m = 10^6 against m = 128;
    then the right-hand side for distinct tokens at d = 1000."""
    repeat = 3 if quick else 10
    base = resolve_config("paper", ["init.scheme=theory"])
    rows, table = [], []
    for m in GRAM_WIDTHS:
        config = base.replace({"model.m": m, "model.m1": m})
        gram = _step_us(config, "gram", repeat)
        weights = _step_us(config, "weights", repeat) if m <= WEIGHT_WIDTH_LIMIT else (float("nan"), float("nan"))
        table.append((m, gram, weights))
    detail = "; ".join(f"m={m}: gram {g[0]:.0f}/{g[1]:.0f} us, weights "
                       + ("-" if w[0] != w[0] else f"{w[0]:.0f}/{w[1]:.0f} us") for m, g, w in table)
    crossover = next((m for m, g, w in table if w[0] == w[0] and g[0] < w[0]), None)
    at = {m: g for m, g, _ in table}
    ratio = at[1_000_000][0] / at[128][0]
    rows.append({"case": "gram: GD step at m=1e6 over m=128", "value": ratio, "unit": "x", "target": 2.0,
                 "met": ratio <= 2.0, "baseline": at[128][0], "baseline_name": "Gram GD step at m=128 (us)",
                 "ratio": ratio, "peak_rss_mib": float("nan"),
                 "detail": f"GD step/flow RHS per width (us): {detail}; crossover (Gram faster from) m={crossover}"})
    distinct = resolve_config("paper", ["data.d=1000", "data.random_tokens=distinct", "model.space=gram"])

    state, data = build_model(distinct), build_problem(distinct).train
    rhs = jax.jit(lambda s: velocity(s, None, data))
    single = _timed(lambda: rhs(state), repeat) * 1e3
    in_loop = _timed(lambda: repeated_velocity(state, data), repeat) * 1e3 / LOOP_EVALUATIONS
    rows.append({"case": "gram: flow RHS, distinct tokens d=1000", "value": in_loop, "unit": "ms per evaluation",
                 "target": 5.0, "met": in_loop <= 5.0, "baseline": single, "baseline_name": "one jitted call (ms)",
                 "ratio": single / in_loop, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                 "detail": f"n=60, L=5, d=1000 distinct: {LOOP_EVALUATIONS} evaluations inside one compiled loop, as "
                           f"the ODE solver runs them; a single call takes {single:.1f} ms, most of it allocating "
                           "fresh d x d outputs"})
    return rows


LOOP_EVALUATIONS = 20


@jax.jit
def repeated_velocity(state, data):
    """The Gram system's right-hand side LOOP_EVALUATIONS times in one program, as a solver
    evaluates it; each evaluation moves G and s (so none is loop-invariant) and reads one entry
    of every d x d output (so none is dead code)."""
    def evaluate(i, current):
        velocity = gram_velocity(current, data)
        k = i % current.A.shape[0]
        probe = velocity.A[k, k] + velocity.P[k, k] + velocity.K[k, k] + velocity.V[k, k]
        return eqx.tree_at(lambda s: (s.G, s.s), current, (current.G + 1e-9 * velocity.G, current.s + 1e-12 * probe))

    return jax.lax.fori_loop(0, LOOP_EVALUATIONS, evaluate, state)


def case_gram_wide(quick: bool) -> list[dict]:
    """The paper's configuration at m = m1 = 10^5 in the Gram space, the flow to t = 10^3, as a
    whole `coocflow run` twice with one compilation cache: training time of the second run
    (compilation cached; the manifest's train_s) and the process's peak memory."""
    width = 10_000 if quick else 100_000
    args = ["run", "paper", "--set", "model.space=gram", "--set", f"model.m={width}", "--set", f"model.m1={width}",
            "--set", "init.scheme=theory", "--set", "train.method=flow", "--set", "train.t_end=1e3",
            "--out", "runs/wide", "--force", "--no-figures"]
    with tempfile.TemporaryDirectory(prefix="coocflow-bench-") as work:
        cache = os.path.join(work, "cache")
        cold, _ = _wall_rss(args, work, cache)
        warm, rss = _wall_rss(args, work, cache)
        manifest = RunFolder(os.path.join(work, "runs", "wide")).manifest()
    train_s = manifest["timings"]["train_s"]
    return [{"case": f"gram: paper at m=m1={width:g}, flow to t=1e3", "value": train_s, "unit": "s training (warm)",
             "target": 30.0, "met": train_s <= 30.0 and rss <= 1024, "baseline": cold,
             "baseline_name": "whole process, cold cache (s)", "ratio": cold / warm, "peak_rss_mib": rss,
             "detail": f"whole process warm {warm:.1f} s, cold {cold:.1f} s; peak RSS {rss:.0f} MiB (target 1024); "
                       f"gram_init={manifest.get('gram_init')}, final loss {manifest['final']['loss']:.3g}"}]


SCALING_TARGETS = (300.0, 20.0)
"""The targets for `coocflow verify theory --scaling both` on 2 cores: cold, and re-checking
a sweep whose runs exist (seconds)."""


def case_scaling(quick: bool) -> list[dict]:
    """The default width sweep as a whole process, cold (new cache, no runs), then again over its
    finished runs (the re-check: verify and the rate tests only). `quick`: three widths, one c0."""
    args = ["verify", "theory", "--scaling", "both", "--out", "sweep"]
    if quick:
        args += ["--values", "32768,49667,75281", "--set", "init.c0=0.02"]
    with tempfile.TemporaryDirectory(prefix="coocflow-bench-") as work:
        cache = os.path.join(work, "cache")
        cold, rss = _wall_rss(args, work, cache)
        again, _ = _wall_rss(args, work, cache)
        report = json.loads(ScalingFolder(os.path.join(work, "sweep")).record_file.read_text())
    runs, target_cold, target_again = len(report["widths"]), *SCALING_TARGETS
    label = "three widths, one c0" if quick else f"{len(report['values'])} widths x {len(report['c0_values'])} c0"
    return [{"case": f"scaling: verify theory --scaling both ({label}), cold", "value": cold, "unit": "s wall",
             "target": target_cold, "met": cold <= target_cold, "baseline": again, "baseline_name": "re-check (s)",
             "ratio": cold / again, "peak_rss_mib": rss,
             "detail": f"{runs} width runs of {len(report['seeds'])} seeds: {cold / runs:.1f} s per run"},
            {"case": "scaling: re-check over finished runs", "value": again, "unit": "s wall", "target": target_again,
             "met": again <= target_again, "baseline": cold, "baseline_name": "cold (s)", "ratio": again / cold,
             "peak_rss_mib": float("nan"), "detail": f"{runs} runs verified and every rate judged"}]


def _wall_rss(args: list[str], cwd: str, cache: str) -> tuple[float, float]:
    """Wall seconds and peak resident memory (MiB) of one `coocflow` process."""
    env = {**os.environ, "COOCFLOW_CACHE_DIR": cache, "COLUMNS": "120"}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "coocflow", *args], cwd=cwd, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise RuntimeError(f"coocflow {' '.join(args)} failed: {child.stderr.read().strip()[-300:]}")
    return wall, usage.ru_maxrss / 1024


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


def case_process(quick: bool) -> list[dict]:
    """Each command as a whole process (imports, compilation or the persistent cache, training,
    figures, writing): cold (a new, empty compilation cache) once, then warm (the same cache)
    `repeat` times; the ratio is cold over warm, i.e. what the cache saves."""
    repeat = 1 if quick else 3
    rows = []
    with tempfile.TemporaryDirectory(prefix="coocflow-bench-") as work:
        for label, args, target, cached in PROCESS_COMMANDS:
            if quick and label in ("run paper", "flow to t = 1e6"):
                continue
            cache = os.path.join(work, "cache-" + label.replace(" ", "-").replace("/", "-"))
            if label.startswith("verify"):
                cache = os.path.join(work, "cache-run-tiny-verify")
                _wall_rss(["run", "tiny", "--out", "runs/tiny", "--force", "--no-figures"], work, cache)
            cold = _wall_rss(args, work, cache)[0] if cached else None
            if label.startswith("verify"):
                _wall_rss(["run", "tiny", "--out", "runs/tiny", "--force", "--no-figures"], work, cache)
            warm = sorted(_wall_rss(args, work, cache)[0] for _ in range(repeat))[repeat // 2]
            rows.append({"case": f"process: {label}", "value": warm, "unit": "s wall (warm cache)", "target": target,
                         "met": warm <= target, "baseline": cold if cold is not None else float("nan"),
                         "baseline_name": "cold cache" if cached else "no compilation involved",
                         "ratio": cold / warm if cold else float("nan"), "peak_rss_mib": float("nan"),
                         "detail": f"median of {repeat} warm runs; cold {cold:.2f} s" if cold else f"median of {repeat}"})
    return rows


def run_case(name: str, quick: bool) -> list[dict]:
    if name in EXTENDED:
        return EXTENDED[name](quick)
    result = {"gd": case_gd, "ensemble": case_ensemble, "flow": case_flow, "large": case_large}[name](quick)
    result["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["case"] = name
    unit, target = TARGETS[name]
    higher_is_better = name in ("large", "ensemble")
    result.update(unit=unit, target=target, met=result["value"] >= target if higher_is_better else result["value"] <= target)
    return [result]


EXTENDED = {"process": case_process, "gram": case_gram, "gram-wide": case_gram_wide, "scaling": case_scaling}
"""Cases that return several rows, each with its own target."""


def run_all(cases: tuple[str, ...] = CASES, quick: bool = False) -> list[dict]:
    """Each case in a fresh subprocess, so peak memory is per case. A case whose process failed is
    `{"case": name, "failed": its last line of stderr}`."""
    results = []
    for name in cases:
        done = subprocess.run([sys.executable, "-m", "coocflow.bench", name] + (["--quick"] if quick else []),
                              capture_output=True, text=True)
        if done.returncode != 0:
            results.append({"case": name, "failed": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"})
            continue
        results.extend(json.loads(done.stdout.strip().splitlines()[-1]))
    return results


if __name__ == "__main__":
    from coocflow.runtime import configure_jax

    configure_jax()  # float64 and the compilation cache in the case's own process

    print(json.dumps(run_case(sys.argv[1], "--quick" in sys.argv)))
