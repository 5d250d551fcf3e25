"""What the test suite spends in JAX, test by test: tracing, lowering and compiling, by program.

As a pytest plugin it listens to JAX's own timing log lines ("Finished tracing ...", "Finished
jaxpr to MLIR module conversion ...", "Finished XLA compilation of ...", and "Persistent
compilation cache hit ..." just before a compile that was a fetch) in every xdist worker, and
writes one JSON file per worker; as a script it sums them:

    JAX_COMPILATION_CACHE_DIR=$(mktemp -d) PYTHONPATH=benchmarks \\
        python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder -m 'not doc_runs' -p suite_compiles
    python benchmarks/suite_compiles.py            # totals, the costliest programs, the costliest files

An empty compilation cache gives what a fresh clone's CI pays. Only the pytest workers are
counted: processes the tests start (the CLI, sweeps' workers, Ray) are not. The records go to
`.pytest_cache/suite-compiles/` (or `$COOCFLOW_SUITE_COMPILES`).
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import re
import threading
import time
from pathlib import Path

FOLDER = Path(os.environ.get("COOCFLOW_SUITE_COMPILES",
                             Path(__file__).resolve().parents[1] / ".pytest_cache" / "suite-compiles"))
LINE = re.compile(r"Finished (tracing|jaxpr to MLIR module conversion|XLA compilation of) (?:\+ transforming )?(\S+)"
                  r".* in ([0-9.e+-]+) sec")
KIND = {"tracing": "trace", "jaxpr": "lower", "XLA": "compile"}
LOGGERS = ("jax._src.dispatch", "jax._src.compiler", "jax._src.interpreters.pxla", "jax._src.pjit")

_test = {"id": "<collection>"}
_records: list[tuple[str, str, str, float, bool]] = []
_fetched = threading.local()


class _Listener(logging.Handler):
    """Turns JAX's timing lines into (test, kind, program, seconds, fetched from the cache) records."""

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Persistent compilation cache hit"):
            _fetched.hit = True
            return
        found = LINE.search(message)
        if found is None:
            return
        kind = KIND[found.group(1).split()[0]]
        hit = kind == "compile" and getattr(_fetched, "hit", False)
        if kind == "compile":
            _fetched.hit = False
        _records.append((_test["id"], kind, found.group(2), float(found.group(3)), hit))


def pytest_configure(config) -> None:
    listener = _Listener(level=logging.DEBUG)
    for name in LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(logging.DEBUG)
        logger.addHandler(listener)


def pytest_runtest_protocol(item, nextitem) -> None:
    _test["id"] = item.nodeid


def pytest_runtest_logreport(report) -> None:
    _records.append((report.nodeid, "wall", report.when, report.duration, False))


def pytest_sessionfinish(session) -> None:
    FOLDER.mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    (FOLDER / f"{worker}.json").write_text(json.dumps({"written": time.time(), "records": _records}))


def summary(folder: Path = FOLDER, top: int = 12) -> str:
    """Totals by kind, the programs that cost most to compile and trace, and the files that cost most."""
    records = [r for path in sorted(folder.glob("*.json")) for r in json.loads(path.read_text())["records"]]
    if not records:
        return f"no records in {folder}: run the suite with -p suite_compiles first"
    lines = []
    totals: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    by_program: dict[tuple[str, str], list[float]] = collections.defaultdict(lambda: [0, 0.0])
    by_file: dict[str, dict[str, float]] = collections.defaultdict(lambda: collections.defaultdict(float))
    for test, kind, program, seconds, hit in records:
        kind = "fetch" if hit else kind
        totals[kind][0] += 1
        totals[kind][1] += seconds
        if kind in ("trace", "lower", "compile"):
            by_program[kind, program][0] += 1
            by_program[kind, program][1] += seconds
        by_file[test.split("::")[0]][kind] += seconds
    lines.append("  ".join(f"{kind} {seconds:.1f} s ({int(count)})" for kind, (count, seconds) in sorted(totals.items())))
    for kind in ("compile", "trace"):
        lines.append(f"{kind}, costliest programs (count, seconds):")
        ranked = sorted(((p, v) for (k, p), v in by_program.items() if k == kind), key=lambda item: -item[1][1])
        lines += [f"  {program:40s} {int(count):5d} {seconds:8.1f}" for program, (count, seconds) in ranked[:top]]
    lines.append("files (test seconds, then trace / lower / compile):")
    ranked_files = sorted(by_file.items(), key=lambda item: -item[1]["wall"])
    lines += [f"  {name:40s} {cost['wall']:7.1f} {cost['trace']:6.1f} {cost['lower']:6.1f} {cost['compile']:6.1f}"
              for name, cost in ranked_files[:top * 2]]
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default=str(FOLDER), help="where the plugin wrote its records")
    parser.add_argument("--top", type=int, default=12, help="rows per table")
    arguments = parser.parse_args()
    print(summary(Path(arguments.folder), arguments.top))
