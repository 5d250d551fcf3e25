"""The numbers do not move: `run paper` by GD and by the flow to t = 300, `run deep` and `run markov`
reproduce the metrics stored in tests/reference/ (written by tests/reference/make_references.py on
one machine), every column within what the computation can promise on another machine or another
thread count (`make_references.machine_tolerance`: 10 rtol for the flow; for S discrete steps
10 x max(S eps, the column's measured amplification of a 4-ulp change at the start)). Measured on a
2-core AVX2 machine against references written elsewhere: 1.3e-13 (paper GD), 6.1e-7 (paper flow,
rtol 1e-6), 4e-16 (deep) and, on one core, 1e-2 of the scale of the Markov task's train accuracy
(GD at lr 2 is chaotic: its sensitivity to 4 ulps is 1e-2 as well). `.ci/run` runs this file under
`taskset -c 0` too. Bit for bit is what one machine promises: tests/test_checkpoint.py."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_reference_runs_reproduce_their_stored_metrics():
    """In a subprocess with XLA's default optimization level (the suite's conftest lowers it, which
    moves a few columns by ulps; see make_references.py), whatever the machine's core count, and under
    the XLA flags the caller set (`XLA_FLAGS=--xla_cpu_max_isa=AVX2 pytest ...`: only the suite's own
    flags are dropped)."""
    from conftest import SUITE_XLA_FLAGS

    env = dict(os.environ)
    kept = [flag for flag in env.pop("XLA_FLAGS", "").split() if flag not in SUITE_XLA_FLAGS.split()]
    if kept:
        env["XLA_FLAGS"] = " ".join(kept)
    env["JAX_COMPILATION_CACHE_DIR"] = str(REPO / ".pytest_cache" / "jax-reference")
    done = subprocess.run([sys.executable, str(REPO / "tests" / "reference" / "make_references.py"), "--check"],
                          capture_output=True, text=True, env=env, timeout=900, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 reference runs: all equal" in done.stdout
