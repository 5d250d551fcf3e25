"""The numbers do not move (issue 21, item 8): `run paper` by GD and by the flow to t = 300, `run
deep` and `run markov` reproduce the metrics stored in tests/reference/ (written by
tests/reference/make_references.py from the code before the System redesign), every column to a
relative 1e-12 and, as measured when they were stored, bit for bit."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_reference_runs_reproduce_their_stored_metrics():
    """In a subprocess with XLA's default optimization level (the suite's conftest lowers it, which
    moves a few columns by ulps; see make_references.py)."""
    env = {key: value for key, value in os.environ.items() if key != "XLA_FLAGS"}
    env["JAX_COMPILATION_CACHE_DIR"] = str(REPO / ".pytest_cache" / "jax-reference")
    done = subprocess.run([sys.executable, str(REPO / "tests" / "reference" / "make_references.py"), "--check"],
                          capture_output=True, text=True, env=env, timeout=900, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 reference runs: all equal" in done.stdout
