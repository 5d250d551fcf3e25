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


def test_the_table_tells_a_failed_case_from_a_case_that_measures_an_error(monkeypatch, tmp_path):
    """A case's own numbers may be named anything (the flow case reports its loss's relative error):
    only a case whose process failed is drawn as failed, with its reason, and the JSON keeps both."""
    import json

    measured = {"case": "flow", "value": 0.62, "unit": "s wall to t = 1e6", "target": 2.0, "met": True,
                "baseline": 119.0, "baseline_name": "GD", "ratio": 191.3, "peak_rss_mib": 772.0,
                "detail": "dopri8", "max_loss_error": 2.6e-8, "error": 2.6e-8}
    failed = {"case": "gd", "failed": "RuntimeError: out of memory"}
    monkeypatch.setattr(bench, "run_all", lambda cases, quick: [measured, failed])
    monkeypatch.delenv("COLUMNS", raising=False)  # a pipe: every row whole, on one line
    done = coocflow_here("bench", "--case", "flow", "--case", "gd", "--json", tmp_path / "b.json")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    flow_row = next(line for line in lines if "│ flow" in line)
    gd_row = next(line for line in lines if "│ gd" in line)
    assert "0.62 s wall" in flow_row and "failed" not in flow_row
    assert "failed" in gd_row and "out of memory" in gd_row
    assert json.loads((tmp_path / "b.json").read_text()) == [measured, failed]
