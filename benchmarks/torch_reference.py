"""Time `coocflow run paper` against a plain PyTorch script of the same training.

What it measures
----------------
1. ``coocflow run paper --out DIR --force`` as a whole process, warm: run once first (which fills
   JAX's compilation cache), then ``--repeat`` times; the median. That is the paper's configuration
   (n = 60, L = 5, d = 64, m = 128, m1 = 256, Kaiming init), 30,000 full-batch GD steps at lr 0.01
   in float64, its 77 observables at 201 observed steps, the run folder and its two figures.
2. The reference: this file run as its own process with ``--reference DIR`` (the interpreter,
   ``import torch``, reading DIR's initial state, the same 30,000 GD steps by ``torch.autograd`` in
   float64, the loss kept at the run's observed steps), ``--repeat`` times; the median. It prints
   its training loop's time too, in us per step.

The ratio is the reference's median over coocflow's. The reference's loss at every observed step is
compared with the run's (seed 0): both are float64, so they agree to the rounding of a different
summation order (about 1e-12 relative), which says the two trained the same thing.

How the reference is independent
--------------------------------
It imports torch, NumPy and PyArrow, never coocflow. It is eq. (1) written from docs/definitions.md:
scores S_i[h, l] = (W_K x_ih) . (W_Q x_il) / sqrt(m) read from A = W_K^T W_Q, attention p_il = the
softmax of S_i[:, l] over the keys h, G(x) = a^T W W_V x, F_i = sum_l sum_h G(x_ih) p_il[h], the mean
logistic loss log(1 + exp(-y_i F_i)); W_Q, W_K, W_V and W train, a is fixed. From the run folder it
reads only seed 0's ``state_init.npz`` (the weights, tokens, labels), ``config.json`` (lr, steps)
and ``metrics.parquet`` (the observed steps, and the loss to compare with).

Requirements
------------
A Python with torch (the CPU build), NumPy and PyArrow runs this file; torch is not a dependency of
coocflow. On this machine: ``python3 -m venv /tmp/tv && /tmp/tv/bin/pip install torch==2.13.0
numpy pyarrow``. The coocflow executable is ``--coocflow PATH`` (default ``.venv/bin/coocflow``).
torch uses its default threads (the cores: 2 here), as coocflow does.

Command
-------
    /tmp/tv/bin/python benchmarks/torch_reference.py [--repeat 3] [--coocflow .venv/bin/coocflow]

The last line of stdout is one JSON object: "coocflow_s", "reference_s" (medians, whole processes),
"ratio", "reference_step_us", "max_rel_loss_diff", "runs" (every timing).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def reference(folder: Path) -> dict:
    """Train eq. (1) by GD in torch from `folder`'s seed-0 initial state; the loss at its observed steps."""
    import numpy as np
    import pyarrow.parquet as pq
    import torch

    config = json.loads((folder / "config.json").read_text())
    lr, steps = float(config["optimizer"]["lr"]), int(config["train"]["steps"])
    metrics = pq.read_table(folder / "metrics.parquet", columns=["seed", "step", "loss"]).to_pydict()
    observed = [s for seed, s in zip(metrics["seed"], metrics["step"]) if seed == metrics["seed"][0]]
    expected = [v for seed, v in zip(metrics["seed"], metrics["loss"]) if seed == metrics["seed"][0]]
    with np.load(folder / "state_init.npz") as z:
        single = z["W_Q"].ndim == 2  # a one-seed run's arrays have no seed axis
        first = {k: z[k] if single else z[k][0] for k in z.files}  # seed 0
    tensor = lambda name, grad: torch.tensor(first[name], dtype=torch.float64, requires_grad=grad)  # noqa: E731
    WQ, WK, WV, W = (tensor(name, True) for name in ("W_Q", "W_K", "W_V", "W"))
    a = tensor("a", False)
    tokens = torch.tensor(first["tokens"], dtype=torch.long)
    labels = torch.tensor(first["labels"], dtype=torch.float64)
    root_m = math.sqrt(WQ.shape[0])
    keys, queries = tokens[:, :, None], tokens[:, None, :]

    def loss() -> torch.Tensor:
        scores = (WK.T @ WQ)[keys, queries] / root_m  # (n, key h, query l)
        p = torch.softmax(scores, dim=1)
        g = ((a @ W) @ WV)[tokens]  # G(x_ih), (n, L)
        F = torch.einsum("nh,nhl->n", g, p)
        return torch.nn.functional.softplus(-labels * F).mean()

    wanted, kept = set(observed), {}
    params = (WQ, WK, WV, W)
    start = time.perf_counter()
    for step in range(steps + 1):
        value = loss()
        if step in wanted:
            kept[step] = value.item()
        if step == steps:
            break
        grads = torch.autograd.grad(value, params)
        with torch.no_grad():
            for p, g in zip(params, grads):
                p.sub_(lr * g)
    loop = time.perf_counter() - start
    diff = max(abs(kept[s] - v) / abs(v) for s, v in zip(observed, expected))
    return {"reference_loop_s": loop, "reference_step_us": loop / steps * 1e6, "max_rel_loss_diff": diff,
            "torch": torch.__version__, "threads": torch.get_num_threads()}


def timed(command: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return seconds, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--coocflow", default=str(ROOT / ".venv" / "bin" / "coocflow"))
    parser.add_argument("--reference", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.reference is not None:
        print(json.dumps(reference(args.reference)))
        return
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "paper"
        run = [args.coocflow, "run", "paper", "--out", str(out), "--force"]
        timed(run)  # fills the compilation cache: both are timed warm
        runs = {"coocflow": [], "reference": []}
        loops = []
        for _ in range(args.repeat):  # alternated, so a drift of the machine's speed falls on both
            runs["coocflow"].append(timed(run)[0])
            seconds, printed = timed([sys.executable, __file__, "--reference", str(out)])
            runs["reference"].append(seconds)
            loops.append(json.loads(printed.strip().splitlines()[-1]))
    ours, theirs = statistics.median(runs["coocflow"]), statistics.median(runs["reference"])
    step_us = statistics.median(loop["reference_step_us"] for loop in loops)
    print(f"coocflow run paper (whole process, warm): {ours:.2f} s  (runs: {', '.join(f'{s:.2f}' for s in runs['coocflow'])})")
    print(f"PyTorch reference (whole process):       {theirs:.2f} s  (runs: {', '.join(f'{s:.2f}' for s in runs['reference'])}); "
          f"its loop {step_us:.0f} us a step, torch {loops[0]['torch']} on {loops[0]['threads']} threads")
    print(f"ratio (reference / coocflow): {theirs / ours:.2f}x; the loss at every observed step agrees to "
          f"{max(loop['max_rel_loss_diff'] for loop in loops):.1e} relative")
    print(json.dumps({"coocflow_s": ours, "reference_s": theirs, "ratio": theirs / ours, "reference_step_us": step_us,
                      "max_rel_loss_diff": max(loop["max_rel_loss_diff"] for loop in loops), "runs": runs}))


if __name__ == "__main__":
    main()
