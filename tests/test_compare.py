"""`coocflow compare`: configuration differences, results side by side, the figure, the
comparison page and the one-line errors."""

import html
import json
import re
import shutil

import numpy as np
import pytest
from conftest import TINY
from rich.console import Console

from coocflow.api import resolve_config, run_and_write
from coocflow.compare import compare_runs, render_comparison
from coocflow.systems.traits import EQ1

DEFAULT_COLUMNS = EQ1.compare_columns
from coocflow.errors import ConfigError, RunFolderError
from coocflow.report import write_report

HOSTILE = "<b>fast & 'slow'</b>"
BASE = [f"{k}={v}" for k, v in TINY.items()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two tiny runs differing in the learning rate (the second with a name that needs escaping),
    a 2-seed ensemble of the first, and the comparison of the first two."""
    root = tmp_path_factory.mktemp("compare")
    slow = resolve_config("tiny", BASE + ["optimizer.lr=0.05"]).replace({"name": HOSTILE})
    folders = {
        "a": run_and_write(resolve_config("tiny", BASE), root / "a", figures=False)[0],
        "b": run_and_write(slow, root / "b", figures=False)[0],
        "ens": run_and_write(resolve_config("tiny", BASE, n_seeds=2), root / "ens", figures=False)[0],
    }
    comparison = compare_runs([folders["a"], folders["b"]], out=root / "cmp")
    return {"root": root, "comparison": comparison, **folders}


def _manifest(folder):
    return json.loads((folder / "manifest.json").read_text())


def test_differences_are_exactly_the_changed_keys_with_the_name_last(runs):
    diff = runs["comparison"].differences
    assert list(diff) == ["optimizer.lr", "name"]
    assert diff["optimizer.lr"] == [TINY["optimizer.lr"], 0.05] and diff["name"] == ["tiny", HOSTILE]


def test_results_side_by_side_come_from_each_manifest(runs):
    comparison = runs["comparison"]
    assert len(comparison.results) == 2
    for result, key in zip(comparison.results, ("a", "b")):
        man = _manifest(runs[key])
        assert result["folder"] == str(runs[key]) and result["status"] == "completed" and result["seeds"] == 1
        assert result["T1"] == man["T1"] and result["final_loss"] == man["final"]["loss"]
        assert result["initial_loss"] == man["initial_loss"] and result["final_G_mu3"] == man["final"]["G_mu3"]
        assert result["delta_A_mu1_mu2"] is not None and result["wall_s"] == man["timings"]["train_s"]
    assert comparison.results[0]["final_t"] == 2 * comparison.results[1]["final_t"]  # half the lr: half the time


def test_writes_compare_json_and_png(runs):
    comparison = runs["comparison"]
    assert comparison.figure == comparison.folder / "compare.png"
    assert comparison.figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    record = json.loads((comparison.folder / "compare.json").read_text())
    assert record["folders"] == [str(runs["a"]), str(runs["b"])]
    assert record["resolved"] == [str(runs["a"].resolve()), str(runs["b"].resolve())]
    assert record["columns"] == list(DEFAULT_COLUMNS) and list(record["differences"]) == ["optimizer.lr", "name"]
    assert [r["final_loss"] for r in record["results"]] == [r["final_loss"] for r in comparison.results]
    assert not list(comparison.folder.glob(".*.tmp"))
    from conftest import coocflow_here

    shown = coocflow_here("show", comparison.folder)
    said = " ".join(shown.stdout.split())
    assert shown.returncode == 0 and f"{comparison.folder}: a compare folder, completed (2 runs)" in said
    assert f"coocflow report {comparison.folder}" in said


def test_ensemble_uses_the_median_and_the_default_folder(runs, monkeypatch):
    monkeypatch.chdir(runs["root"])
    comparison = compare_runs([runs["a"], runs["ens"]], columns=["loss,test_acc"])
    assert comparison.folder.parent.name == "runs" and comparison.folder.name.startswith("compare-")
    assert comparison.columns == ["loss", "test_acc"] and list(comparison.differences) == ["seeds"]
    spread = _manifest(runs["ens"])["T1_spread"]
    assert comparison.results[1]["seeds"] == 2 and comparison.results[1]["T1"] == spread["median"]
    assert comparison.labels == ["tiny [a]", "tiny [ens]"] and comparison.figure.is_file()


def test_render_prints_both_tables(runs):
    console = Console(record=True, width=200)
    render_comparison(runs["comparison"], console)
    text = console.export_text()
    assert "configuration differences" in text and "optimizer.lr" in text and HOSTILE in text
    assert "final loss" in text and f"{runs['comparison'].results[1]['final_loss']:.4g}" in text


def test_comparison_page_escapes_names_and_has_one_figure_per_column(runs):
    page = write_report(runs["comparison"].folder).read_text()
    assert html.escape(HOSTILE) in page and "<b>fast" not in page
    assert len(re.findall(r'<div class="figure" id="cmp\d+">', page)) == len(DEFAULT_COLUMNS)
    assert "Configuration differences" in page and "optimizer.lr" in page and "https://" not in page.split("<script>")[0]


@pytest.mark.parametrize("columns, hint", [(["G_mu"], "did you mean G_mu1"), (["los"], "did you mean loss")])
def test_unknown_column_suggests_the_nearest(runs, columns, hint, tmp_path):
    with pytest.raises(ConfigError, match=hint):
        compare_runs([runs["a"], runs["b"]], columns=columns, out=tmp_path / "c")
    assert not (tmp_path / "c").exists()


def test_bad_folders_are_refused_in_one_line(runs, tmp_path):
    with pytest.raises(ConfigError, match="at least two run folders"):
        compare_runs([runs["a"]], out=tmp_path / "c")
    with pytest.raises(RunFolderError, match="nowhere: does not exist"):
        compare_runs([runs["a"], tmp_path / "nowhere"], out=tmp_path / "c")
    with pytest.raises(ConfigError, match="given twice"):
        compare_runs([runs["a"], runs["a"] / ".." / "a"], out=tmp_path / "c")
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    (unfinished / "config.json").write_text("{}")
    with pytest.raises(RunFolderError, match="in progress.*--resume"):
        compare_runs([runs["a"], unfinished], out=tmp_path / "c")
    with pytest.raises(ConfigError, match="one of the compared run folders"):
        compare_runs([runs["a"], runs["b"]], out=runs["a"])


def test_a_variant_is_named_and_compared_at_common_times(tmp_path):
    """`run RUN_DIR --set optimizer.lr=...` names the variant and says how the time axis moves; compare
    warns that the runs end at different times and reports the loss at the common time."""
    from typer.testing import CliRunner

    from coocflow.cli import app
    from coocflow.compare import compare_runs, value_at
    from coocflow.storage import load_run

    sets = [x for k, v in TINY.items() for x in ("--set", f"{k}={v}")]
    runner = CliRunner()
    assert runner.invoke(app, ["run", "paper", *sets, "--out", str(tmp_path / "base")]).exit_code == 0
    done = runner.invoke(app, ["run", str(tmp_path / "base"), "--set", "optimizer.lr=0.05", "--out", str(tmp_path / "half")])
    assert done.exit_code == 0, done.output
    assert "named paper-lr0.05" in done.output and "t_end 20 -> 10" in " ".join(done.output.split())
    assert load_run(tmp_path / "half").manifest["name"] == "paper-lr0.05"
    comparison = compare_runs([tmp_path / "base", tmp_path / "half"], out=tmp_path / "cmp")
    assert any("end at different flow times" in w and "t = 10" in w for w in comparison.warnings)
    base, half = comparison.results
    assert base["common_t"] == half["common_t"] == 10.0
    metrics = load_run(tmp_path / "base").metrics
    assert base["loss_at_common_t"] == value_at(metrics, "loss", 10.0)
    observed = np.asarray(metrics["t"]) == 10.0
    if observed.any():
        assert base["loss_at_common_t"] == float(np.median(np.asarray(metrics["loss"])[observed]))
    assert half["loss_at_common_t"] == half["final_loss"]
    shutil.copytree(tmp_path / "base", tmp_path / "copy")
    same = compare_runs([tmp_path / "base", tmp_path / "copy"], out=tmp_path / "cmp2")
    assert same.warnings == []
