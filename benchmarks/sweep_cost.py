"""How a sweep's cost grows with its number of runs: the T1 table (benchmarks/t1_table.toml) at
several designs (widths x seeds), each timed as a whole `coocflow sweep` process cold (empty
compilation cache) and warm (the cache the cold run left), against the independent SciPy solve
of the same runs (benchmarks/t1_table.py). Writes a log-log plot of seconds against runs and the
numbers as JSON.

    python benchmarks/sweep_cost.py --designs 6x6,16x8,16x64,16x256 --plot docs/img/sweep_cost.png

The fixed cost (tracing and compiling the one program every job shares, imports) is the cold
minus warm time; the slope of the warm line is the cost per run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import t1_table  # noqa: E402  (the baseline and the design specs, beside this file)


def timed_sweep(spec: Path, out: Path, cache: Path) -> float:
    """Seconds of the whole process `coocflow sweep SPEC --out OUT --yes` with `cache` as its
    compilation cache."""
    exe = Path(sys.executable).parent / "coocflow"
    start = time.perf_counter()
    subprocess.run([str(exe), "sweep", str(spec), "--out", str(out), "--yes"], check=True,
                   env=dict(os.environ, COOCFLOW_CACHE_DIR=str(cache)), stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def measure(widths: int, seeds: int) -> dict:
    work = Path(tempfile.mkdtemp(prefix="sweep-cost-"))
    try:
        spec = t1_table.design_spec(HERE / "t1_table.toml", widths, seeds, work)
        cold = timed_sweep(spec, work / "cold", work / "cache")
        warm = timed_sweep(spec, work / "warm", work / "cache")
        _, scipy_s, _ = t1_table.baseline(work / "cold")
        return {"widths": widths, "seeds": seeds, "runs": widths * seeds, "cold_s": cold, "warm_s": warm,
                "scipy_s": scipy_s}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib  # lazy: only for --plot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r["runs"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4), constrained_layout=True)
    for key, label, style in (("cold_s", "coocflow sweep, cold", "o-"), ("warm_s", "coocflow sweep, warm cache", "s-"),
                              ("scipy_s", "SciPy DOP853, one run after another", "^--")):
        ax.loglog(runs, [r[key] for r in rows], style, label=label)
    ax.set_xlabel("runs (widths x seeds)")
    ax.set_ylabel("wall seconds")
    ax.set_title("T1 table (benchmarks/t1_table.toml), 2-core CPU")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--designs", default="6x6,16x8,16x64,16x256", help="WIDTHSxSEEDS, comma-separated")
    ap.add_argument("--plot", type=Path, default=None, help="write the log-log plot here")
    ap.add_argument("--json", type=Path, default=None, help="write the numbers here")
    args = ap.parse_args(argv)
    rows = []
    for design in args.designs.split(","):
        widths, seeds = (int(x) for x in design.lower().split("x"))
        row = measure(widths, seeds)
        rows.append(row)
        print(f"{row['runs']:>6} runs ({widths} x {seeds}): cold {row['cold_s']:.1f} s, warm {row['warm_s']:.1f} s, "
              f"SciPy {row['scipy_s']:.2f} s", flush=True)
    if args.plot:
        plot(rows, args.plot)
    text = json.dumps(rows)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
