"""Config format 2 ([optimizer] and [solver] out of [train]) and the folders of format 1: the
folders under tests/data/format1 were written by 5f236ea, the last format-1 commit
(tests/data/format1/make_format1.py), so these tests read, resume and reuse real old folders."""

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from coocflow.api import ensure_run, resolve_config
from coocflow.cli import app
from coocflow.config import (
    CONFIG_FORMAT,
    RENAMED_KEYS,
    Config,
    config_from_dict,
    format1_records,
    migrate_format1,
)
from coocflow.errors import ConfigError
from coocflow.run import config_hashes, record_hash
from coocflow.storage.checkpoint import read_checkpoint_meta
from coocflow.storage.folders import RunFolder

FORMAT1 = Path(__file__).parent / "data" / "format1"
TINY_TWO_SEEDS = {"seeds": [0, 1]}
KILLED_FLOW = {"train.method": "flow", "train.t_end": 15.0, "solver.name": "tsit5",
               "observe.checkpoint_every_s": 0, "seeds": [0, 1]}
STORED_FLOW = {**KILLED_FLOW, "observe.start": 0.1}
"""The runs of the fixtures, in format 2: `tiny` by GD, and `tiny` by the flow to t = 15, whose
observation grid format 1 began at lr = 0.1 (see the grid test below)."""


def stored_record(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text())


def test_the_fixtures_are_format_1_and_read_as_the_same_runs_in_format_2():
    for name, overrides in (("run-gd", TINY_TWO_SEEDS), ("run-flow-uninterrupted", STORED_FLOW)):
        record = stored_record(FORMAT1 / name)
        assert "format" not in record and "lr" in record["train"] and "optimizer" not in record
        assert RunFolder(FORMAT1 / name).config() == resolve_config("tiny", overrides)


def test_a_stored_record_keeps_its_format_and_the_new_sections():
    record = Config().to_dict()
    assert record["format"] == CONFIG_FORMAT == 2
    assert set(record["optimizer"]) == {"lr", "momentum", "b1", "b2", "eps", "weight_decay"}
    assert set(record["solver"]) == {"name", "rtol", "atol", "max_steps"}
    assert not {"lr", "rtol", "solver"} & set(record["train"])
    assert config_from_dict(record) == Config()


def test_a_format_1_hash_is_among_the_hashes_its_run_accepts():
    """What a format-1 checkpoint or study variant carries (the hash of its config.json) is one of
    `config_hashes` of the migrated config, and only the first (the current hash) is written."""
    for name in ("run-gd", "run-flow-killed", "run-flow-uninterrupted"):
        config = RunFolder(FORMAT1 / name).config()
        hashes = config_hashes(config)
        assert record_hash(stored_record(FORMAT1 / name)) in hashes[1:]
        assert hashes[0] == record_hash(config.to_dict())
    assert read_checkpoint_meta(FORMAT1 / "run-flow-killed")["config_hash"] == record_hash(
        stored_record(FORMAT1 / "run-flow-killed"))


def test_format1_records_are_exactly_the_old_records_of_a_config():
    for config in (Config(), resolve_config("paper", {"train.method": "flow"}), resolve_config("theory"),
                   resolve_config("tiny", STORED_FLOW)):
        records = format1_records(config)
        assert records, config.name
        for record in records:
            assert "optimizer" not in record and "solver" not in record and "format" not in record
            assert config_from_dict(record) == config
    assert format1_records(resolve_config("tiny", KILLED_FLOW)) == [], "format 1 could not write this grid"


def test_the_flow_grid_of_a_format_1_run_is_kept_where_the_new_default_differs():
    """Format 1 began a kaiming flow's grid at lr (round(15 / 0.1) = 150 grid steps); format 2
    takes train.steps = 200 of them. The migration writes observe.start = lr, so the old run keeps
    its times, and a format-2 run without it observes on the new grid."""
    old = RunFolder(FORMAT1 / "run-flow-killed").config()
    assert old.observe.start == 0.1 and old.flow_start == 0.1
    new = resolve_config("tiny", KILLED_FLOW)
    assert new.observe.start == 0 and new.flow_start == pytest.approx(15.0 / 200, rel=1e-15)
    paper_flow = resolve_config("paper", {"train.method": "flow"})
    assert paper_flow.flow_start == paper_flow.optimizer.lr, "t_end = lr x steps: the grid GD observes"


FLOW_ACROSS_MACHINES = 10.0
"""The fixtures were written on another machine, whose reductions round differently: a flow's runs
agree to a few of the solver's rtol there (tests/reference/make_references.py, `SOLVER_FACTOR`), so
the resumed run is held to 10 rtol of each column's (array's) scale. Bit for bit holds where one
machine computes both runs: tests/test_checkpoint.py."""


def _within(got: np.ndarray, want: np.ndarray, rtol: float) -> bool:
    if got.shape != want.shape or not np.array_equal(np.isnan(got), np.isnan(want)):
        return False
    if not np.issubdtype(want.dtype, np.floating):
        return bool(np.array_equal(got, want))
    scale = np.nanmax(np.abs(want)) if np.any(np.isfinite(want)) else 0.0
    return bool(scale == 0 or np.nanmax(np.abs(got - want)) <= rtol * scale)


def test_a_format_1_checkpoint_resumes_to_the_old_uninterrupted_run(tmp_path):
    """Resumed in this process: the suite compiles with its own XLA flags (tests/conftest.py), not the
    default ones the fixtures were written with, which moves a few ulps, a rounding difference
    like another machine's, within `FLOW_ACROSS_MACHINES` rtol."""
    from coocflow.api import resume_run

    folder = tmp_path / "killed"
    shutil.copytree(FORMAT1 / "run-flow-killed", folder)
    meta = read_checkpoint_meta(folder)
    resume_run(folder, figures=False)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["resumed"]["observation"] == meta["next_obs"] > 0
    assert stored_record(folder)["format"] == CONFIG_FORMAT
    got, want = pq.read_table(folder / "metrics.parquet"), pq.read_table(FORMAT1 / "run-flow-uninterrupted" / "metrics.parquet")
    assert got.column_names == want.column_names and got.num_rows == want.num_rows
    rtol = FLOW_ACROSS_MACHINES * RunFolder(folder).config().solver.rtol
    for column in want.column_names:
        assert _within(got[column].to_numpy(), want[column].to_numpy(), rtol), column
    for name in ("state_init.npz", "state_final.npz", "state_t1.npz"):
        with np.load(folder / name) as a, np.load(FORMAT1 / "run-flow-uninterrupted" / name) as b:
            assert a.files == b.files and all(_within(a[k], b[k], rtol) for k in b.files), name


def test_a_complete_format_1_run_is_reused_and_listed(tmp_path):
    folder = tmp_path / "gd"
    shutil.copytree(FORMAT1 / "run-gd", folder)
    before = stored_record(folder)
    outcome = ensure_run(resolve_config("tiny", TINY_TWO_SEEDS), folder)
    assert outcome.how == "reused" and stored_record(folder) == before, "reuse must not rewrite the folder"
    changed = ensure_run(resolve_config("tiny", {**TINY_TWO_SEEDS, "verify.loss_exponent": 3.0}), folder)
    assert changed.how == "reused"
    assert stored_record(folder)["format"] == CONFIG_FORMAT and stored_record(folder)["verify"]["loss_exponent"] == 3.0
    shown = CliRunner().invoke(app, ["show", str(FORMAT1 / "run-gd")])
    assert shown.exit_code == 0 and "lr=0.1" in shown.output


def test_a_format_1_sweep_resumes_from_its_own_spec_and_runs_only_the_missing_job(tmp_path):
    out = tmp_path / "sweep"
    shutil.copytree(FORMAT1 / "sweep-killed", out)
    before = (out / "jobs" / "train.lr=0.05" / "manifest.json").read_text()
    result = CliRunner().invoke(app, ["sweep", str(FORMAT1 / "sweep-lr.toml"), "--out", str(out), "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert "1 done, 1 to run" in result.output
    assert (out / "jobs" / "train.lr=0.05" / "manifest.json").read_text() == before, "a finished job ran again"
    record = json.loads((out / "sweep.json").read_text())
    assert [job["config"]["format"] for job in record["jobs"]] == [CONFIG_FORMAT] * 2
    assert [job["config"]["optimizer"]["lr"] for job in record["jobs"]] == [0.05, 0.1]
    again = CliRunner().invoke(app, ["sweep", str(FORMAT1 / "sweep-lr.toml"), "--out", str(out), "--workers", "1"])
    assert again.exit_code == 0 and "2 done, 0 to run" in again.output


def test_format_1_names_are_read_as_their_new_ones_wherever_a_key_is_given():
    by_string = resolve_config("tiny", ["train.lr=0.05", "train.solver=tsit5", "train.rtol=1e-8"])
    by_mapping = resolve_config("tiny", {"train.lr": 0.05, "train.solver": "tsit5", "train.rtol": 1e-8})
    assert by_string == by_mapping
    assert (by_string.optimizer.lr, by_string.solver.name, by_string.solver.rtol) == (0.05, "tsit5", 1e-8)
    assert Config().replace({"train.momentum": 0.5}).optimizer.momentum == 0.5
    assert set(RENAMED_KEYS.values()) <= {f"{s}.{k}" for s in ("optimizer", "solver")
                                          for k in Config().to_dict()[s]}


@pytest.mark.parametrize("tree, message", [
    ({"format": 3}, "format: 3 is not a config format this coocflow reads"),
    ({"format": "2"}, "format: '2' is not a config format"),
    ({"format": 2, "train": {"lr": 0.1}}, "train.lr: config format 1's name of optimizer.lr"),
    ({"train": {"lr": 0.1}, "optimizer": {"lr": 0.2}}, "train.lr, optimizer.lr: the same setting twice"),
    ({"solver": {"name": "rk4"}}, "solver.name: must be one of tsit5, dopri5, dopri8, kvaerno5"),
    ({"optimizer": {"lr": -1.0}}, r"optimizer.lr: must be > 0 \(got -1.0\)"),
])
def test_format_errors_are_one_line_naming_the_key_and_the_fix(tree, message):
    with pytest.raises(ConfigError, match=message) as caught:
        config_from_dict(tree)
    assert "\n" not in str(caught.value)


def test_the_migration_leaves_its_input_alone_and_moves_every_renamed_key():
    tree = {"train": {old.split(".")[1]: 1e-3 if old != "train.solver" else "tsit5" for old in RENAMED_KEYS}}
    snapshot = json.dumps(tree, sort_keys=True)
    moved = migrate_format1(tree)
    assert json.dumps(tree, sort_keys=True) == snapshot
    assert moved["train"] == {}
    assert moved["solver"]["name"] == "tsit5" and moved["optimizer"]["lr"] == 1e-3


def test_ls_lists_a_format_1_run_by_its_rate(tmp_path):
    shutil.copytree(FORMAT1 / "run-gd", tmp_path / "runs" / "old")
    listed = CliRunner().invoke(app, ["ls", str(tmp_path / "runs")])
    assert listed.exit_code == 0 and "gd lr=0.1 x200" in listed.output


def test_a_run_differing_only_in_settings_its_method_does_not_read_is_reused(tmp_path):
    """GD reads no [solver]; the flow with its own end time reads no [optimizer]."""
    folder = tmp_path / "gd"
    shutil.copytree(FORMAT1 / "run-gd", folder)
    assert ensure_run(resolve_config("tiny", {**TINY_TWO_SEEDS, "solver.rtol": 1e-3}), folder).how == "reused"
    flow = tmp_path / "flow"
    shutil.copytree(FORMAT1 / "run-flow-uninterrupted", flow)
    assert ensure_run(resolve_config("tiny", {**STORED_FLOW, "optimizer.momentum": 0.5}), flow).how == "reused"
    assert ensure_run(resolve_config("tiny", {**TINY_TWO_SEEDS, "optimizer.lr": 0.05}), folder).how == "trained"
