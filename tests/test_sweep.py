"""Sweeps: spec validation, a small grid end to end, resume after SIGKILL, failed-job isolation,
and the Ray executor against the local one."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from coocflow.cli import app
from coocflow.errors import CoocflowError, ConfigError
from coocflow.sweep import SweepStore, aggregate, default_figures, load_spec, spec_from_dict
from coocflow.sweep.aggregate import independent_axes
from coocflow.sweep.execute import pending_jobs, run_in_process
from conftest import REPO, coocflow_here

BIN = Path(sys.executable).parent / "coocflow"
TINY_SET = {"train.steps": 40, "observe.points": 12, "observe.chunks": 2}


def _spec_file(tmp_path: Path, grid: dict, name: str = "grid", seeds: int = 2, extra: str = "") -> Path:
    lines = [f'name = "{name}"', 'base = "tiny"', f"seeds = {seeds}", "[set]"]
    lines += [f'"{k}" = {v}' for k, v in TINY_SET.items()]
    lines += [extra, "[grid]"] + [f'"{k}" = {v!r}'.replace("'", '"') for k, v in grid.items()]
    path = tmp_path / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _sweep(*args) -> tuple[int, str]:
    """The CLI in-process; a CoocflowError gets exit code 2 and its line, as `main()` gives it."""
    done = CliRunner().invoke(app, ["sweep", *map(str, args)])
    if isinstance(done.exception, CoocflowError):
        return 2, done.output + str(done.exception)
    return done.exit_code, done.output


@pytest.mark.parametrize("tree,message", [
    ({"grid": {"model.mm": [1]}}, "did you mean 'model.m'"),
    ({"grid": {"model.m": 8}}, "non-empty list"),
    ({"zip": {"model.m": [4, 8], "model.m1": [4]}}, "same length"),
    ({"grid": {"model.m": [8, -1]}}, "job model.m=-1: model.m: must be a positive width"),
    ({"seeds": 0}, "seeds: expected a count"),
    ({"base": "generalization"}, "multi-run study"),
    ({"grdi": {}}, "unknown sweep key 'grdi'"),
    ({"checks": "no"}, "checks: expected true or false"),
    ({"grid": {"seeds": [1, 2]}}, "top-level `seeds = N`"),
    ({"name": "../escape"}, "name: '../escape' has an empty, '.' or '..' path part"),
])
def test_bad_specs_fail_with_one_line_naming_the_field(tree, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        spec_from_dict({"base": "tiny", **tree})


def test_spec_expands_grid_times_zip_and_batches_seeds():
    spec = spec_from_dict({"base": "tiny", "seeds": 3, "grid": {"model.m": [4, 8], "data.L": [4, 5]},
                           "zip": {"init.c0": [1.0, 0.5], "init.c1": [1.0, 0.5]}})
    assert len(spec.jobs) == 8 and all(job.config.seed_list == (0, 1, 2) for job in spec.jobs)
    assert spec.jobs[0].id == "model.m=4_data.L=4_init.c0=1.0_init.c1=1.0"
    assert {job.config.init.c0 == job.config.init.c1 for job in spec.jobs} == {True}


def test_jobs_group_by_the_program_they_need():
    """In the Gram space the widths and init scales are traced values (one program); the sequence
    length is a shape (one program each); pending jobs come grouped by program."""
    spec = spec_from_dict({"base": "tiny", "seeds": 2, "set": {"model.space": "gram"},
                           "grid": {"model.m": [4, 8, 16], "data.L": [4, 5]}, "zip": {"init.c0": [1.0, 0.5]}})
    assert spec.programs == 2 and len(spec.jobs) == 12
    order = [job["config"]["data"]["L"] for job in pending_jobs(spec, _NothingDone(), retry_failed=False)]
    assert order == [4] * 6 + [5] * 6
    weights = spec_from_dict({"base": "tiny", "grid": {"model.m": [4, 8]}})
    assert weights.programs == 2, "in the weight space a width is a shape"


class _NothingDone:
    def state(self, job_id: str) -> str:
        return "pending"


def test_jobs_that_differ_in_traced_values_share_one_program(tmp_path):
    """Three Gram-space jobs at three widths m, m1 and two init scales: the first traces the
    programs, the others reuse them (`traced` 0), and their numbers are each job's own."""
    spec = spec_from_dict({"base": "tiny", "seeds": 2, "set": {**TINY_SET, "model.space": "gram", "data.n": 18},
                           "zip": {"model.m": [8, 64, 512], "model.m1": [8, 16, 32], "init.c0": [1.0, 0.5, 0.5]},
                           "checks": False})
    assert spec.programs == 1
    store = SweepStore(tmp_path / "sweep")
    store.prepare(spec, force=False)
    results = []
    run_in_process(tmp_path / "sweep", pending_jobs(spec, store, False), results.append, lambda job_id: None)
    assert [r["state"] for r in results] == ["done"] * 3
    assert results[0]["traced"] >= 1 and [r["traced"] for r in results[1:]] == [0, 0]
    summary = store.read_table("summary")
    finals = np.asarray(summary["final.loss"])
    assert len(set(np.round(finals, 12))) == 6, "every job and seed has its own loss"
    assert not [name for name in summary.column_names if name.startswith("check")], "checks = false: none run"
    # The zip's three keys move together: one figure, against the first (a line per m1 would be one point).
    assert [path.name for path in default_figures(tmp_path / "sweep")] == ["T1_vs_model.m.png"]
    assert independent_axes({"axes": ["model.m", "data.L", "init.c0", "init.c1"], "grid": {"model.m": [4], "data.L": [4]},
                             "zip": {"init.c0": [1.0], "init.c1": [1.0]}}) == ["model.m", "data.L", "init.c0"]


def test_small_grid_end_to_end_then_resume_runs_nothing(tmp_path):
    spec = _spec_file(tmp_path, {"model.m": [4, 8]})
    out = tmp_path / "sweep"
    code, output = _sweep(spec, "--out", out, "--workers", 1)
    assert code == 0, output
    summary = pq.read_table(list((out / "table" / "summary").glob("*.parquet"))).to_pydict()
    assert sorted(zip(summary["model.m"], summary["seed"])) == [(4, 0), (4, 1), (8, 0), (8, 1)]
    assert all(np.isfinite(summary["T1"])) and "check.thm3.1_all_correct" in summary
    metrics = SweepStore(out).read_table("metrics")
    assert metrics.num_rows == 2 * 2 * 12 and {"model.m", "job", "seed", "loss"} <= set(metrics.column_names)
    import duckdb

    answer = duckdb.sql(f"""SELECT "model.m", median(T1) FROM '{out}/table/summary/*.parquet'
                            GROUP BY "model.m" ORDER BY "model.m" """).fetchall()
    assert [m for m, _ in answer] == [4, 8] and all(t > 0 for _, t in answer)
    lines = aggregate(out, "model.m", "T1")
    assert len(lines) == 1 and list(lines[0]["x"]) == [4.0, 8.0]
    assert (out / "figures" / "T1_vs_model.m.png").stat().st_size > 10000
    stamps = {p: p.stat().st_mtime_ns for p in (out / "table").rglob("*.parquet")}
    code, output = _sweep(spec, "--out", out, "--workers", 1)
    assert code == 0 and "2 done, 0 to run" in output
    assert stamps == {p: p.stat().st_mtime_ns for p in (out / "table").rglob("*.parquet")}
    status = CliRunner().invoke(app, ["sweep-status", str(out)])
    assert "2 done, 0 failed, 0 pending" in status.output
    shown = coocflow_here("show", out)  # what it is and where to look, not a run folder's missing files
    said = " ".join(shown.stdout.split())
    assert shown.returncode == 0 and f"{out}: a sweep folder, 2/2 jobs done" in said, shown.stdout + shown.stderr
    assert f"coocflow sweep-status {out}" in said and f"coocflow report {out}" in said
    other = _spec_file(tmp_path, {"model.m": [4, 16]}, name="other")
    code, output = _sweep(other, "--out", out)
    assert code == 2 and "holds a different sweep" in output


def test_a_failed_job_is_recorded_and_the_others_finish(tmp_path):
    spec = _spec_file(tmp_path, {"data.test_tokens": ["fresh", "unseen"]}, extra='"data.d" = 5', seeds=1)
    out = tmp_path / "sweep"
    code, output = _sweep(spec, "--out", out, "--workers", 1)
    assert code == 2 and "1 of 2 jobs failed" in output
    states = SweepStore(out).states()
    assert states == {"data.test_tokens=fresh": "done", "data.test_tokens=unseen": "failed"}
    import json

    error = json.loads(SweepStore(out).failed_file("data.test_tokens=unseen").read_text())["error"]
    assert error.startswith("data.test_tokens: the training set holds every random token")
    status = CliRunner().invoke(app, ["sweep-status", str(out)])
    assert "1 done, 1 failed, 0 pending" in status.output


def test_sigkill_mid_sweep_then_resume_loses_and_duplicates_nothing(tmp_path):
    """A subprocess runs the sweep and is killed with SIGKILL once its first job is done; the
    same command then finishes only the missing jobs."""
    spec = _spec_file(tmp_path, {"model.m": [4, 6, 8]})
    out = tmp_path / "sweep"
    process = subprocess.Popen([str(BIN), "sweep", str(spec), "--out", str(out), "--workers", "1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    summaries = out / "table" / "summary"
    deadline = time.time() + 240
    while time.time() < deadline and not (summaries.is_dir() and any(summaries.glob("*.parquet"))):
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    finished = {p.name: p.stat().st_mtime_ns for p in summaries.glob("*.parquet")}
    assert 1 <= len(finished) < 3, "the kill should land mid-sweep"
    code, output = _sweep(spec, "--out", out, "--workers", 1)
    assert code == 0, output
    assert f"{len(finished)} done, {3 - len(finished)} to run" in output
    assert all(summaries.joinpath(name).stat().st_mtime_ns == stamp for name, stamp in finished.items())
    metrics = SweepStore(out).read_table("metrics").to_pydict()
    keys = list(zip(metrics["job"], metrics["seed"], metrics["t"]))
    assert len(keys) == len(set(keys)) == 3 * 2 * 12
    assert not list((out / "jobs").glob(".*")), "the killed job's staging folder is cleaned up"


def test_ray_executor_gives_the_local_numbers(tmp_path):
    """The same jobs as Ray tasks on a local Ray instance: identical tables, bit for bit."""
    import ray  # noqa: F401  (in the test extras)

    spec = _spec_file(tmp_path, {"model.m": [4, 8]})
    local, remote = tmp_path / "local", tmp_path / "ray"
    assert _sweep(spec, "--out", local, "--workers", 1)[0] == 0
    code, output = _sweep(spec, "--out", remote, "--ray", "local", "--workers", 2)
    assert code == 0, output
    for kind in ("metrics", "summary"):
        a = SweepStore(local).read_table(kind).sort_by([("job", "ascending"), ("seed", "ascending")]).to_pydict()
        b = SweepStore(remote).read_table(kind).sort_by([("job", "ascending"), ("seed", "ascending")]).to_pydict()
        assert a.keys() == b.keys()
        for column in a:
            np.testing.assert_array_equal(np.asarray(a[column]), np.asarray(b[column]), err_msg=f"{kind}.{column}")


def test_a_width_sweep_trains_on_ray_and_its_folders_are_reused_here(tmp_path):
    """`verify --scaling --ray local`: every width trains as a Ray task; the run
    folders it leaves are complete runs that the in-process sweep reuses untouched, measuring the
    same rows the Ray sweep wrote. Here beside the sweep's Ray test, so the two Ray instances never
    share the machine's two cores (the suite gives each test file to one worker)."""
    import json

    import ray  # noqa: F401  (in the test extras)

    from coocflow.api import resolve_config
    from conftest import width_scaling

    out = tmp_path / "ray"
    cli = Path(sys.executable).parent / "coocflow"
    done = subprocess.run([str(cli), "verify", "tiny", "--scaling", "m", "--values", "8,16", "--seeds", "1",
                           "--ray", "local", "--workers", "2", "--out", str(out)],
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    manifests = sorted((out / "runs").glob("*/manifest.json"))
    assert [m.parent.name for m in manifests] == ["m-16", "m-8"]
    before = [m.stat().st_mtime_ns for m in manifests]
    here = width_scaling(resolve_config("tiny", ["train.method=flow"], n_seeds=1), "m", [8, 16], out)
    assert [m.stat().st_mtime_ns for m in manifests] == before
    assert json.loads((out / "scaling.json").read_text())["rows"] == json.loads(json.dumps(here["rows"]))


@pytest.mark.parametrize("spec", sorted((REPO / "examples").glob("sweep_*.toml")), ids=lambda p: p.name)
def test_example_sweeps_are_valid_specs(spec):
    """Every shipped sweep spec loads and expands into valid configs (what the README runs)."""
    parsed = load_spec(spec)
    assert parsed.jobs and all(job.config.name.startswith(f"{parsed.name}/") for job in parsed.jobs)


def test_the_benchmark_t1_table_is_one_program_shape_of_event_times_only():
    """benchmarks/t1_table.toml (the theory-regime T1 table, timed against SciPy) is a valid spec whose jobs all
    share one compiled program, samples its Grams, stops at T1 and skips the per-seed checks."""
    from coocflow.sweep.spec import program_key

    parsed = load_spec(REPO / "benchmarks" / "t1_table.toml")
    assert len(parsed.jobs) == 6 and not parsed.checks
    assert len({program_key(job.config) for job in parsed.jobs}) == 1
    assert {(job.config.init.gram_from, job.config.train.stop_at) for job in parsed.jobs} == {("sampled", "all_correct")}


def test_sweep_plot_orders_its_legend_by_value_and_labels_the_widths_plainly():
    """The legend used to read m = 128, 32, 64 (sorted as text) and the ticks 3x10^1; no longer."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from coocflow.sweep.aggregate import group_order, label_x_values

    assert group_order([128, 32, 64, 32]) == [32, 64, 128]
    assert group_order([0.5, "b", 2, "a"]) == [0.5, 2, "a", "b"]
    fig, ax = plt.subplots()
    ax.plot([32, 64, 128], [1.0, 2.0, 4.0])
    ax.set(xscale="log", yscale="log")
    label_x_values(ax, [32, 64, 128])
    fig.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["32", "64", "128"]
    plt.close(fig)


def _children(pid: int) -> list[int]:
    """The live processes whose parent is `pid` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _two_jobs_training(tmp_path: Path, seeds: int, steps: int, widths: str, *flags: str):
    """A sweep of long tiny jobs started in its own session, returned once two of its jobs train."""
    spec = tmp_path / "long.toml"
    spec.write_text(f'name = "long"\nbase = "tiny"\nseeds = {seeds}\n[set]\n"train.steps" = {steps}\n'
                    f'"observe.points" = 12\n"observe.chunks" = 20\n[grid]\n"model.m" = {widths}\n')
    out = tmp_path / "sweep"
    process = subprocess.Popen([str(BIN), "sweep", str(spec), "--out", str(out), *flags],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 240
    while time.time() < deadline and len(list(out.glob("jobs/*/config.json"))) < 2:
        assert process.poll() is None, process.stderr.read()
        time.sleep(0.2)
    time.sleep(1.0)
    return spec, out, process


@pytest.mark.parametrize("whom", ["group", "parent"])
def test_ctrl_c_stops_every_worker_keeps_finished_jobs_and_says_how_to_resume(tmp_path, whom):
    """SIGINT to the terminal's process group, or to the sweep alone, while two
    workers train: exit 130, no worker left within 10 s, one line with the command that resumes."""
    spec, out, process = _two_jobs_training(tmp_path, 2, 40000, "[4, 6, 8, 10]", "--workers", "2")
    workers = _children(process.pid)
    assert len(workers) >= 2, "two workers train"
    if whom == "group":
        os.killpg(process.pid, signal.SIGINT)
    else:
        process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and f"resume with: coocflow sweep {spec} --out {out}" in lines[0], stderr
    until = time.time() + 10
    while time.time() < until and any(_alive(pid) for pid in workers):
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in workers), "a worker outlived the interrupted sweep"


def _tree(pid: int) -> list[int]:
    """Every live process below `pid` (its children, theirs, ...)."""
    found, todo = [], [pid]
    while todo:
        for child in _children(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_ray_sweep_leaves_no_process_and_says_how_to_resume(tmp_path, signum):
    """On Ray: a signal to the sweep alone while its local Ray instance trains two
    jobs stops the raylet, the GCS and every Ray worker within 10 s, exits 130, and the last line
    names the command that resumes; the resumed sweep runs only what was not finished."""
    spec, out, process = _two_jobs_training(tmp_path, 1, 60000, "[4, 6, 8]", "--ray", "local", "--workers", "2")
    started = _tree(process.pid)
    assert len(started) >= 3, "Ray's processes run under the sweep"
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert f"resume with: coocflow sweep {spec} --out {out}" in stderr.strip().splitlines()[-1], stderr
    until = time.time() + 10
    while time.time() < until and any(_alive(pid) for pid in started):
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in started), "a Ray process outlived the interrupted sweep"
