"""The example notebook runs top to bottom (at tiny size) and the Python API behaves."""

import os
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO


def test_example_notebook_executes(tmp_path):
    import nbclient
    import nbformat

    notebook = nbformat.read(REPO / "examples" / "quickstart.ipynb", as_version=4)
    os.environ["COOCFLOW_NOTEBOOK_SIZE"] = "tiny"
    try:
        nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                                resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        del os.environ["COOCFLOW_NOTEBOOK_SIZE"]
    outputs = "".join(o.get("text", "") for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs)
    assert "thm3.1_all_correct" in outputs and "T1 = " in outputs
    assert (tmp_path / "runs" / "notebook-ensemble" / "report.html").is_file()


def test_run_load_verify_api(tmp_path):
    import coocflow

    run = coocflow.run("tiny", out=tmp_path / "run", seeds=2, overrides={"optimizer.lr": 0.2}, figures=False)
    times = set(run.metrics["t"].to_pylist())
    assert run.seeds == [0, 1] and run.metrics.num_rows == 2 * len(times) > 40 and run.config["optimizer"]["lr"] == 0.2
    again = coocflow.load(tmp_path / "run")
    t, loss = again.series("loss", seed=1)
    assert t[0] == 0 and np.all(np.diff(t) > 0) and loss[-1] < loss[0]
    verification = coocflow.verify(again)
    rates = verification.pass_rates()
    assert rates["thm3.1_all_correct"]["of"] == 2 and (tmp_path / "run" / "verify.json").is_file()
    assert rates["appendix_c_closed_forms"] == {"passed": 1, "failed": 0, "failed_outside_premises": 0, "vacuous": 0,
                                                 "failed_unstated": 0, "passed_unstated_met": 0, "inconclusive": 0,
                                                 "unchecked": 0, "no_verdict": 0, "of": 1, "evidence": "identity"}
    table = verification.table()
    assert table.column("check").to_pylist() == list(rates) and table.num_rows == len(rates)


def test_api_signatures_are_explicit():
    import inspect

    import coocflow

    run = inspect.signature(coocflow.run)
    assert list(run.parameters) == ["experiment_or_config", "seeds", "seed", "out", "overrides", "figures", "force"]
    assert all(p.kind is p.KEYWORD_ONLY for name, p in run.parameters.items() if name != "experiment_or_config")
    assert coocflow.run.__doc__ and coocflow.load.__doc__ and coocflow.verify.__doc__


def test_api_writes_under_runs_like_the_cli(tmp_path, monkeypatch):
    import coocflow
    from coocflow.errors import ConfigError

    monkeypatch.chdir(tmp_path)
    run = coocflow.run("tiny", overrides=["train.steps=20"], figures=False)
    assert run.folder.parent == Path("runs") and run.folder.name.startswith("tiny-")
    variant = coocflow.run(run.folder, overrides={"optimizer.lr": 0.2}, out="runs/variant", figures=False)
    assert variant.config["train"]["steps"] == 20 and variant.config["optimizer"]["lr"] == 0.2
    with pytest.raises(ConfigError, match="did you mean 'optimizer.lr'"):
        coocflow.run("tiny", overrides={"lr": 0.1})
