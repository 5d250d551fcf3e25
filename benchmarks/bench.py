"""Run coocflow's benchmarks: `python benchmarks/bench.py [--quick] [--case NAME ...]`.

The same as `coocflow bench`; see benchmarks/README.md for the targets, the formulations that
were tried, and the numbers measured.
"""

from coocflow.cli import app

if __name__ == "__main__":
    import sys

    app(["bench", *sys.argv[1:]])
