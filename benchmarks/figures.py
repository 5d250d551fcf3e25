"""Time a run's figures: `python benchmarks/figures.py RUN_FOLDER [--repeat 3]`.

Make a run folder first, e.g. `coocflow run paper --set train.steps=3000 --out /tmp/figs_paper
--no-figures` (add `--seeds 4` for an ensemble, whose curves are medians with 10-90% bands).

Prints, in one process: the import cost of Matplotlib and of coocflow.plots, the first call of
`write_run_figures` (PNG figure1 + overview; font and mathtext caches are cold), the median of
`--repeat` further calls, the same with figure1.pdf as well (`coocflow run --pdf`), and the old
implementation (figure1.png + figure1.pdf + overview.png, constrained layout, dpi 130), loaded
from the last commit that had it, with the ratio old / new. Target: new PNG figures < 1.5 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

OLD_COMMIT = "f5de6092839e2634cf00cc92f26d70ecc19650dc"
"""The last commit whose src/coocflow/plots/figures.py drew figures the old way."""
OLD_PATH = "src/coocflow/plots/figures.py"


def old_module():
    """The old figures module from git, or None where git or the commit is not available."""
    root = Path(__file__).resolve().parents[1]
    try:
        source = subprocess.run(["git", "show", f"{OLD_COMMIT}:{OLD_PATH}"], cwd=root, capture_output=True,
                                text=True, check=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    module = types.ModuleType("coocflow_old_figures")
    sys.modules[module.__name__] = module  # dataclasses look their module up there
    exec(compile(source, f"{OLD_COMMIT[:7]}:{OLD_PATH}", "exec"), module.__dict__)
    return module


def timed(call, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as folder:
            start = time.perf_counter()
            call(Path(folder))
            times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_folder", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-old", action="store_true", help="skip the old implementation")
    args = parser.parse_args()

    start = time.perf_counter()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401

    import_mpl = time.perf_counter() - start
    start = time.perf_counter()
    from coocflow.plots import SeriesView, write_run_figures
    from coocflow.storage import load_run

    import_plots = time.perf_counter() - start
    view = SeriesView.from_metrics(load_run(args.run_folder).metrics)
    print(f"{args.run_folder}: {len(view.t)} times x {len(view.t1s)} seed(s), T1 = {view.t1}")
    print(f"import matplotlib {import_mpl:.2f} s, coocflow.plots {import_plots:.2f} s (jax via observables)")

    first = timed(lambda d: write_run_figures(view, d), 1)[0]
    new = timed(lambda d: write_run_figures(view, d), args.repeat)
    new_pdf = timed(lambda d: write_run_figures(view, d, formats=("png", "pdf")), args.repeat)
    print(f"first call (png)            {first:.3f} s   (cold font and mathtext caches)")
    met = "met" if max(first, *new) < 1.5 else "NOT met"
    print(f"new png (figure1, overview) {statistics.median(new):.3f} s   median of {args.repeat}: "
          + ", ".join(f"{t:.3f}" for t in new) + f"   target < 1.5 s: {met}")
    print(f"new png + figure1.pdf       {statistics.median(new_pdf):.3f} s")
    old = None if args.no_old else old_module()
    if old is None:
        baseline, what = statistics.median(new_pdf), "new png + pdf (old implementation not available)"
    else:
        old_view = old.SeriesView(view.t, view.series, view.t1s)
        baseline = statistics.median(timed(lambda d: old.write_run_figures(old_view, d), args.repeat))
        what = f"old implementation, png + pdf ({OLD_COMMIT[:7]})"
    print(f"baseline: {what} {baseline:.3f} s")
    print(f"ratio baseline / new png: {baseline / statistics.median(new):.1f}x")


if __name__ == "__main__":
    main()
