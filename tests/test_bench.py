"""The benchmark harness runs and reports ratios (timing targets live in benchmarks/, not here)."""

from conftest import coocflow_here

from coocflow import bench
from coocflow.bench import TARGETS, run_case


def test_quick_gd_case_reports_a_ratio():
    (result,) = run_case("gd", quick=True)
    assert result["value"] > 0 and result["baseline"] > 0
    assert abs(result["ratio"] - result["baseline"] / result["value"]) < 1e-9
    assert result["peak_rss_mib"] > 0 and set(TARGETS) == {"gd", "ensemble", "flow", "large"}
    assert result["met"] == (result["value"] <= result["target"])


def test_process_case_times_whole_commands(monkeypatch):
    monkeypatch.setattr(bench, "PROCESS_COMMANDS", (("coocflow --help", ["--help"], 0.5, False),
                                                    ("coocflow keys", ["keys"], 0.5, False)))
    rows = bench.case_process(quick=True)
    assert [r["case"] for r in rows] == ["process: coocflow --help", "process: coocflow keys"]
    assert all(0 < r["value"] < 60 and r["met"] == (r["value"] <= 0.5) for r in rows)


def test_unknown_case_is_one_line():
    done = coocflow_here("bench", "--case", "nosuch")
    assert done.returncode == 2 and "--case nosuch: choose from" in done.stderr
