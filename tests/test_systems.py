"""Systems: any `AbstractSystem` trains by GD and by the flow, resumes,
sweeps, compares and reports through the same commands; the worked example under examples/ is the
proof, and its own invariants and the ODE-vs-GD limit check the generic integrators."""

import hashlib
import json
import sys
from pathlib import Path

import jax
import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from coocflow.api import resolve_config, resume_run, run_and_write
from coocflow.cli import app
from coocflow.config import Config
from coocflow.errors import ConfigError
from coocflow.flow.system import integrate
from coocflow.sweep.spec import spec_from_dict
from coocflow.systems import AbstractSystem
from coocflow.systems.registry import system_class, system_of

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "icl_regression.py"
SMALL = ["--set", "train.steps=300", "--set", "observe.points=24", "--set", "data.n=60", "--set", "data.n_test=60",
         "--set", "seeds=[0,1]"]


@pytest.fixture
def at_root(monkeypatch):
    """The example names its system by a path from the repository root, as a user runs it."""
    monkeypatch.chdir(ROOT)


def example_config(**overrides) -> Config:
    config = resolve_config(str(ROOT / "examples" / "icl_regression.toml"))
    return config.replace({"train.steps": 300, "observe.points": 24, "data.n": 60, "data.n_test": 60,
                           "seeds": [0, 1], **overrides})


def cli(*args):
    done = CliRunner().invoke(app, list(args))
    assert done.exit_code == 0, done.output
    return done.output


def test_the_example_is_at_most_150_lines_and_an_abstract_system(at_root):
    assert len(EXAMPLE.read_text().splitlines()) <= 150
    cls = system_class("examples/icl_regression.py:InContextRegression")
    assert issubclass(cls, AbstractSystem) and cls is system_class("examples/icl_regression.py:InContextRegression")


def test_the_example_trains_by_gd_and_by_the_flow_through_run(at_root, tmp_path):
    for method, extra in (("gd", []), ("flow", ["--set", "train.method=flow", "--set", "train.t_end=6"])):
        out = tmp_path / method
        text = cli("run", "examples/icl_regression.toml", *SMALL, *extra, "--out", str(out))
        assert "InContextRegression" in text.replace("\n", "") and (out / "training.png").is_file()
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["system"] == "examples/icl_regression.py:InContextRegression"
        assert manifest["status"] == "completed" and manifest["method"] == method
        table = pq.read_table(out / "metrics.parquet").to_pydict()
        assert {"seed", "step", "t", "loss", "test_loss", "gamma_error", "gamma_diagonal_1"} <= set(table)
        loss = np.asarray(table["loss"])[np.asarray(table["seed"]) == 0]
        assert loss[-1] < 0.8 * loss[0]
        with np.load(out / "state_final.npz") as state:
            assert state["W_KQ"].shape == (2, 6, 6)
        shown = cli("show", str(out))
        assert "gamma_error" in shown and ("solver" in shown) == (method == "flow"), shown


def test_a_parameter_without_gradient_never_moves(at_root):
    """W_KQ's last column multiplies the query's label slot, which is 0: its gradient is exactly 0,
    so the generic integrators must leave it exactly where it started (GD and the flow)."""
    for overrides in ({}, {"train.method": "flow", "train.t_end": 6.0}):
        config = example_config(**overrides)
        training = integrate(system_of(config), config)
        assert np.array_equal(training.final.W_KQ[:, :, -1], training.initial.W_KQ[:, :, -1])
        assert np.all(training.series["kq_to_y"] == training.series["kq_to_y"][:, :1])
        assert not np.array_equal(training.final.W_KQ, training.initial.W_KQ)


def test_gd_tends_to_the_flow_as_the_step_shrinks(at_root):
    """The flow is the lr -> 0 limit of GD (first order): at t = 2 the loss of GD at lr 0.02 is
    within 2% of the flow's, and shrinking lr tenfold shrinks the gap at least fivefold."""
    flow = integrate(system_of(c := example_config(**{"train.method": "flow", "train.t_end": 2.0,
                                                      "solver.rtol": 1e-10, "solver.atol": 1e-12})), c)
    gaps = []
    for lr in (0.02, 0.002):
        config = example_config(**{"optimizer.lr": lr, "train.steps": round(2.0 / lr)})
        gd = integrate(system_of(config), config)
        gaps.append(np.max(np.abs(gd.series["loss"][:, -1] - flow.series["loss"][:, -1]) / flow.series["loss"][:, -1]))
    assert gaps[0] < 0.02 and gaps[1] < gaps[0] / 5, gaps


def interrupt_after_two_chunks(config: Config, out: Path) -> None:
    """Train `config` into `out` and stop it with Ctrl-C after its second chunk (a checkpoint is left)."""
    calls = {"n": 0}

    def progress(done: float) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_and_write(config, out, progress=progress, figures=False)


def test_an_interrupted_system_run_resumes_bit_for_bit(at_root, tmp_path):
    config = example_config(**{"observe.checkpoint_every_s": 0.0, "observe.chunks": 6})
    _, whole = run_and_write(config, tmp_path / "whole", figures=False)
    interrupt_after_two_chunks(config, tmp_path / "cut")
    assert (tmp_path / "cut" / "checkpoint.npz").is_file() and not (tmp_path / "cut" / "manifest.json").exists()
    _, resumed = resume_run(tmp_path / "cut", figures=False)
    assert resumed.training.resumed is not None
    first, second = whole.table(), resumed.table()
    assert first.keys() == second.keys()
    for name in first:
        np.testing.assert_array_equal(first[name], second[name], err_msg=name)


def test_the_example_sweeps_compares_and_reports_through_the_commands(at_root, tmp_path):
    sweep = tmp_path / "sweep"
    spec = tmp_path / "spec.toml"
    spec.write_text(f'name = "icl-N"\nbase = "{ROOT / "examples" / "icl_regression.toml"}"\nseeds = 2\n'
                    '[set]\n"train.steps" = 200\n"observe.points" = 16\n"data.n" = 60\n"data.n_test" = 60\n'
                    '[grid]\n"system.N" = [10, 20]\n')
    cli("sweep", str(spec), "--out", str(sweep), "--workers", "1")
    assert (sweep / "figures" / "final.loss_vs_system.N.png").is_file()
    summary = pq.read_table(next((sweep / "table" / "summary").glob("*.parquet"))).to_pydict()
    assert {"final.loss", "final.gamma_error", "system.N", "status"} <= set(summary)
    runs = sorted(path for path in (sweep / "jobs").iterdir() if path.is_dir())
    assert len(runs) == 2
    assert [json.loads((run / "config.json").read_text())["settings"]["N"] for run in runs] == [10, 20]
    compared = cli("compare", *map(str, runs), "--out", str(tmp_path / "cmp"))
    assert "settings.N" in compared and "G(mu1)" not in compared
    record = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert record["columns"][0] == "loss"
    assert all(r["final gamma_error"] is not None for r in record["results"]), "a system's own observables"
    for folder in (runs[0], sweep, tmp_path / "cmp"):
        assert "report:" in cli("report", str(folder))
        page = (folder / "report.html").read_text()
        assert "Traceback" not in page and "plotly" in page.lower()
    assert "gamma_error" in (runs[0] / "report.html").read_text()
    from coocflow.listing import describe_folder

    entry = describe_folder(runs[0])
    assert entry.kind == "run" and entry.config.startswith("InContextRegression n=60 N=10 d=5 scale=0.3 gd")


def test_the_built_in_systems_sweep_as_plain_runs():
    spec = spec_from_dict({"name": "deep-width", "base": "deep", "grid": {"model.m": [8, 16]}})
    assert {job.config.system for job in spec.jobs} == {"deep"}
    spec = spec_from_dict({"name": "markov-n", "base": "markov", "grid": {"data.n": [24, 48]}})
    assert {job.config.system for job in spec.jobs} == {"markov"}
    with pytest.raises(ConfigError, match="multi-run study"):
        spec_from_dict({"name": "x", "base": "optimizers", "grid": {"model.m": [8, 16]}})


def test_markov_runs_as_a_system_into_a_run_folder(tmp_path):
    config = Config(name="markov-system").replace({
        "system": "markov", "data.d": 8, "data.L": 4, "data.n": 24, "data.n_test": 24, "model.m": 8, "model.m1": 8,
        "optimizer.lr": 0.5, "train.steps": 40, "observe.points": 12, "seeds": [0, 1]})
    folder, run = run_and_write(config, tmp_path / "markov")
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["loss_name"] == "train_loss" and (folder / "training.png").is_file()
    assert np.isfinite(run.table()["train_loss"]).all()


@pytest.mark.parametrize("spec, message", [
    ("nowhere.py:Task", "is not a file"),
    ("examples/icl_regression.py:Missing", "no AbstractSystem subclass named 'Missing'"),
    ("no_such_module_here:Task", "cannot import module"),
])
def test_a_bad_system_is_one_line_naming_the_field(at_root, spec, message):
    with pytest.raises(ConfigError, match=message) as caught:
        system_class(spec)
    assert str(caught.value).startswith("system: ") and "\n" not in str(caught.value)


def test_a_malformed_system_is_refused_at_the_door():
    with pytest.raises(ConfigError, match="system: 'examples/x.py' is neither"):
        Config().replace({"system": "examples/x.py"})


def test_a_system_refuses_a_training_it_cannot_do(at_root):
    with pytest.raises(ConfigError, match="train.method: the icl-regression system trains with"):
        system_of(example_config(**{"train.method": "sgd", "train.batch_size": 10}))


def test_the_deep_system_is_vmapped_over_seeds_like_one_seed_at_a_time():
    """The generic loop batches seeds by vmap; each seed's series equals its own run alone."""
    config = Config(name="deep-system").replace({
        "system": "deep", "data.d": 8, "data.L": 4, "data.n": 12, "data.n_test": 12, "model.m": 8, "model.m1": 8,
        "optimizer.lr": 0.05, "train.steps": 20, "observe.points": 6, "seeds": [3, 4]})
    both = integrate(system_of(config), config)
    alone = integrate(system_of(config.replace({"seeds": [4]})), config.replace({"seeds": [4]}))
    np.testing.assert_allclose(both.series["loss"][1], alone.series["loss"][0], rtol=1e-12)
    assert jax.tree.leaves(both.final)[0].shape[0] == 2


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_each_system_validates_its_own_settings_at_the_door(at_root):
    """The data model's rules bind the systems trained on it (eq. (1), deep); the others
    read and check their own settings when the configuration is resolved, before any folder exists."""
    with pytest.raises(ConfigError, match=r"^model.layers, model.heads: apply to the deep system"):
        Config().replace({"model.layers": 2})
    with pytest.raises(ConfigError, match=r"^data.n: must be a positive multiple of 6"):
        Config().replace({"data.n": 25})
    assert Config(system="markov").replace({"data.n": 25}).data.n == 25
    with pytest.raises(ConfigError, match=r"^data.d: a Markov chain needs at least two states \(got 1\)$"):
        resolve_config("markov", ["data.d=1"])
    with pytest.raises(ConfigError, match=r"^model.heads: must be >= 1 and divide model.m=64 \(got 3\)$"):
        resolve_config("deep", ["model.heads=3"])
    with pytest.raises(ConfigError, match=r"job settings.N=0: dtype, settings.N, settings.d, settings.scale: the "):
        spec_from_dict({"name": "icl", "base": str(ROOT / "examples" / "icl_regression.toml"),
                        "grid": {"settings.N": [0, 4]}})


def test_a_system_declares_its_own_settings(at_root, tmp_path):
    """A System's `Settings` are its own typed section: read from [settings] or --set system.KEY,
    checked at the door with a did-you-mean, listed by `keys --system`, kept in config.json and part
    of the run's identity; a config without them keeps its hash, and a System without them refuses them."""
    from coocflow.run import config_hash

    toml = str(ROOT / "examples" / "icl_regression.toml")
    config = resolve_config(toml, ["system.N=40"])
    assert config.settings == {"N": 40, "d": 5, "scale": 0.3}
    assert system_of(config).N == 40 and system_of(example_config()).N == 20
    assert resolve_config(toml, ["settings.N=40"]) == config
    assert config.to_dict()["settings"] == {"N": 40, "d": 5, "scale": 0.3}
    assert config_hash(config) != config_hash(resolve_config(toml))
    assert "settings" not in Config().to_dict(), "a config without settings keeps its stored form and hash"
    for overrides, message in (
            (["system.NN=3"], r"^unknown setting 'settings.NN': did you mean 'settings.N'\?$"),
            (["system.N=2.5"], r"^settings.N: expected a whole number, got 2.5$"),
            (["system.N=0"], r"^dtype, settings.N, settings.d, settings.scale: the example runs")):
        with pytest.raises(ConfigError, match=message):
            resolve_config(toml, overrides)
    with pytest.raises(ConfigError, match=r"^settings: eq. \(1\) has no settings of its own"):
        resolve_config("tiny", ["system.N=3"])
    with pytest.raises(ConfigError, match=r"^settings: the deep system declares no settings of its own; drop settings.N$"):
        resolve_config("deep", ["system.N=3"])
    markov = Config(system="markov").replace({"data.d": 8, "data.n": 12, "data.n_test": 12, "data.L": 4})
    flatter = markov.replace({"system.alpha": 50.0})
    assert system_of(flatter).alpha == 50.0 and system_of(markov).alpha == 0.2 and "settings" not in markov.to_dict()
    rows = [np.asarray(system_of(c).data(0)[0].tokens) for c in (markov, flatter)]
    assert rows[0].shape == rows[1].shape and not np.array_equal(rows[0], rows[1]), "alpha draws another chain"
    with pytest.raises(ConfigError, match=r"^unknown setting 'settings.alph': did you mean 'settings.alpha'\?$"):
        resolve_config("markov", ["system.alph=1"])
    listed = cli("keys", "--system", "examples/icl_regression.py:InContextRegression")
    assert "settings.N" in listed and "examples per prompt" in listed and "settings.scale" in listed
    assert "declares no settings" in cli("keys", "--system", "deep")
    assert "settings.alpha" in cli("keys", "--system", "markov")
    out = tmp_path / "icl40"
    cli("run", toml, *SMALL, "--set", "system.N=30", "--out", str(out))
    assert json.loads((out / "config.json").read_text())["settings"]["N"] == 30
    assert "[settings]" in cli("keys", "--toml", "--from", str(out))
    assert "N=30, d=5, scale=0.3" in cli("show", str(out))


def test_the_python_api_runs_the_example_as_the_command_does(at_root, tmp_path):
    """`coocflow.run(toml)` writes the folder `coocflow run toml` writes (same metrics, bit for bit),
    and its Run plots every observable and writes the report."""
    import coocflow

    overrides = {"train.steps": 150, "observe.points": 16, "data.n": 60, "data.n_test": 60, "seeds": [0, 1]}
    run = coocflow.run("examples/icl_regression.toml", overrides=overrides, out=tmp_path / "api")
    cli("run", "examples/icl_regression.toml", *[x for k, v in overrides.items() for x in ("--set", f"{k}={v}")],
        "--out", str(tmp_path / "cli"))
    a, b = (pq.read_table(tmp_path / name / "metrics.parquet").to_pydict() for name in ("api", "cli"))
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert run.manifest["system"].endswith(":InContextRegression") and run.T1 is None
    assert len(run.plot().axes) >= 6 and run.report().is_file()


def test_every_system_decodes_its_own_arrays(at_root, tmp_path):
    """One codec per system: `from_arrays(arrays(params))` is `params`, leaf for leaf, in the
    system's own parameter type, for all five systems; and a system's run folder reads back into it."""
    configs = [Config(), Config().replace({"model.space": "gram", "model.neurons": True, "model.m": 64,
                                           "model.m1": 32}),
               Config(system="deep").replace({"model.m": 8, "model.m1": 8, "model.layers": 2, "model.heads": 2}),
               Config(system="markov").replace({"data.d": 8, "model.m": 8, "model.m1": 8}), example_config()]
    for config in configs:
        system = system_of(config)
        params = system.init(jax.random.PRNGKey(3))
        back = system.from_arrays({k: np.asarray(v) for k, v in system.arrays(params).items()})
        assert type(back) is type(params), config.system
        for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(back)):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=config.system)
    from coocflow.run import read_states

    config = example_config()
    _, run = run_and_write(config, tmp_path / "run", figures=False)
    initial, final = read_states(tmp_path / "run")
    for a, b in ((initial, run.training.initial), (final, run.training.final)):
        assert type(a).__name__ == "LinearAttention"
        np.testing.assert_array_equal(a.W_KQ, b.W_KQ)
        np.testing.assert_array_equal(a.W_PV, b.W_PV)


def test_check_reproduce_and_verify_serve_every_system(at_root, tmp_path):
    """`run --check-reproduce` trains a System's folder again and compares its own columns and arrays
    (it used to train eq. (1) on the config and fail on `KeyError: 'W'`); a changed stored array is
    named. `verify` on a System that declares no theorem is one line, exit 2, before any training
    (it used to end in `KeyError: 'tokens'`)."""
    from conftest import coocflow_here

    from coocflow.reproduce import check_reproduce
    from coocflow.storage.run_folder import write_arrays

    folder, _ = run_and_write(example_config(), tmp_path / "icl", figures=False)
    differences, counted = check_reproduce(folder)
    with np.load(folder / "state_final.npz") as stored:
        arrays = {k: stored[k] for k in stored.files}
    assert differences == [] and counted["weights"] == len(arrays) == 2
    arrays["W_KQ"] = arrays["W_KQ"] * (1 + 1e-9)
    write_arrays(folder / "state_final.npz", arrays)
    assert [d.name for d in check_reproduce(folder)[0]] == ["state_final.W_KQ"]

    toml = str(ROOT / "examples" / "icl_regression.toml")
    for args in ([str(folder)], [toml, "--out", str(tmp_path / "never")],
                 [toml, "--scaling", "m", "--out", str(tmp_path / "never")]):
        done = coocflow_here("verify", *args)  # in this process: an exception would fail the test here
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "declares no theorem" in lines[0] and "Traceback" not in done.stderr
    assert not (tmp_path / "never").exists() and not list(folder.glob("verify*"))


def test_a_changed_system_is_refused_by_resume_check_reproduce_and_sweep(at_root, tmp_path):
    """A run records the code that defines its System (file and SHA-256, `show` prints it). Editing
    the file between a run and its resume, its check-reproduce, or a sweep that would keep its finished
    job is refused with one line naming the file, unless --accept-changed-code."""
    from coocflow.errors import RunFolderError
    from coocflow.reproduce import check_reproduce

    source = tmp_path / "my_system.py"
    source.write_text(EXAMPLE.read_text())
    config = example_config(**{"system": f"{source}:InContextRegression", "observe.checkpoint_every_s": 0.0,
                               "observe.chunks": 6, "train.steps": 120})
    interrupt_after_two_chunks(config, tmp_path / "cut")
    whole, _ = run_and_write(config, tmp_path / "whole", figures=False)
    recorded = json.loads((whole / "manifest.json").read_text())["system_code"]
    assert recorded["file"] == str(source.resolve()) and len(recorded["sha256"]) == 64
    assert "sha256 " + recorded["sha256"][:12] in cli("show", str(whole))

    source.write_text(source.read_text() + "\n# an edit\n")
    refused = CliRunner().invoke(app, ["run", "--resume", str(tmp_path / "cut")])
    assert isinstance(refused.exception, RunFolderError)
    message = str(refused.exception)
    assert "changed since this run was recorded" in message and str(source.resolve()) in message
    assert "--accept-changed-code" in message and "\n" not in message
    with pytest.raises(RunFolderError, match="changed since this run was recorded"):
        check_reproduce(whole)
    assert check_reproduce(whole, accept_changed_code=True)[0] == []
    cli("run", "--resume", str(tmp_path / "cut"), "--accept-changed-code", "--no-figures")
    assert (tmp_path / "cut" / "manifest.json").is_file()

    spec = tmp_path / "spec.toml"
    spec.write_text(f'name = "edited"\nbase = "{ROOT / "examples" / "icl_regression.toml"}"\nseeds = 1\n'
                    f'[set]\nsystem = "{source}:InContextRegression"\n"train.steps" = 40\n"observe.points" = 8\n'
                    '"data.n" = 60\n"data.n_test" = 60\n')
    cli("sweep", str(spec), "--out", str(tmp_path / "sweep"), "--workers", "1")
    source.write_text(source.read_text() + "\n# another edit\n")
    refused = CliRunner().invoke(app, ["sweep", str(spec), "--out", str(tmp_path / "sweep"), "--workers", "1"])
    assert isinstance(refused.exception, RunFolderError) and "keep its results" in str(refused.exception)
    cli("sweep", str(spec), "--out", str(tmp_path / "sweep"), "--workers", "1", "--accept-changed-code")


def test_a_system_file_edited_in_a_running_process_runs_as_edited_and_records_what_ran(at_root, tmp_path):
    """In one process (a notebook, `coocflow.cli.invoke`), a System file edited between two runs is
    executed again: the second run trains the edited code and records its hash (it trained the code
    first imported while recording the edited file's hash). A file edited while a run trains does not
    change what the run records: the hash of the source that defined the class it trained."""
    from coocflow.run import train, write_run

    source = tmp_path / "edited_system.py"
    source.write_text(EXAMPLE.read_text())
    config = example_config(**{"system": f"{source}:InContextRegression", "train.steps": 60, "observe.points": 4,
                               "seeds": [0]})
    first, _ = run_and_write(config, tmp_path / "first", figures=False)
    source.write_text(source.read_text().replace("return 0.5 * jnp.mean((predict", "return 2.0 * jnp.mean((predict"))
    second, _ = run_and_write(config, tmp_path / "second", figures=False)
    loss = [pq.read_table(folder / "metrics.parquet").column("loss").to_numpy() for folder in (first, second)]
    np.testing.assert_allclose(loss[1][0], 4 * loss[0][0], rtol=1e-12)  # the same initial state, the edited loss
    recorded = [json.loads((folder / "manifest.json").read_text())["system_code"]["sha256"] for folder in (first, second)]
    assert recorded[0] != recorded[1] == hashlib.sha256(source.read_bytes()).hexdigest()

    trained = train(config)
    source.write_text(source.read_text() + "\n# edited while the run trained\n")
    written = write_run(trained, tmp_path / "third", figures=False)
    assert json.loads((written / "manifest.json").read_text())["system_code"]["sha256"] == recorded[1]


OWN_RUN = '''
"""A System whose runs keep one more file and draw their own figure, through coocflow.run."""
from pathlib import Path
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from coocflow.run import TrainedRun
from coocflow.systems import AbstractSystem


class Shrink(AbstractSystem):
    size: int = eqx.field(static=True, default=2)
    name: ClassVar[str] = "shrink"
    run_type: ClassVar[str] = "{source}:StampedRun"

    @classmethod
    def from_config(cls, config):
        return cls()

    def init(self, key):
        return 1.0 + jax.random.uniform(key, (self.size,))

    def data(self, seed):
        return jnp.asarray(1.0), jnp.asarray(1.0)

    def loss(self, params, train):
        return 0.5 * train * jnp.sum(params**2)

    def observe(self, params, initial, train, test):
        return {{"loss": self.loss(params, train)}}


class StampedRun(TrainedRun):
    FIGURE: ClassVar[str] = "shrink.png"

    def files(self):
        final = self.table()["loss"][-1]
        return {{**super().files(), "stamp.npz": {{"final_loss": np.asarray(final)}}}}

    def manifest(self, figures):
        return {{**super().manifest(figures), "stamped": True}}

    @classmethod
    def redraw(cls, folder):
        path = Path(folder) / cls.FIGURE
        path.write_bytes(b"drawn")
        return [path]
'''


def test_a_systems_own_run_type_writes_its_folder_through_the_one_run_path(tmp_path):
    """A System names its own `TrainedRun` subclass (`run_type`, here by file path): `run`, the
    figures, `--check-reproduce` and the redraw of a missing figure all go through it."""
    from conftest import coocflow_here

    from coocflow.run import draw_figures, run_type

    source = tmp_path / "shrink.py"
    source.write_text(OWN_RUN.format(source=source))
    spec = tmp_path / "shrink.toml"
    spec.write_text(f'name = "shrink"\nsystem = "{source}:Shrink"\n[train]\nmethod = "flow"\nt_end = 2.0\n'
                    '[observe]\npoints = 5\n')
    out = tmp_path / "run"
    done = coocflow_here("run", spec, "--out", out)
    assert done.returncode == 0, done.stderr
    assert run_type(f"{source}:Shrink").__name__ == "StampedRun"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["stamped"] and manifest["figures"] == ["shrink.png"] and (out / "shrink.png").read_bytes() == b"drawn"
    with np.load(out / "stamp.npz") as stamp:
        assert float(stamp["final_loss"]) == pq.read_table(out / "metrics.parquet").column("loss").to_pylist()[-1]
    assert coocflow_here("run", out, "--check-reproduce").returncode == 0
    (out / "shrink.png").unlink()
    assert draw_figures(out) == [out / "shrink.png"] and (out / "shrink.png").is_file()


def test_every_built_in_system_declares_its_traits_and_they_import_without_jax():
    """The read-only commands (`ls`, `compare`, `report`, the checks at the door) ask
    `coocflow.systems.traits` instead of building a System; each built-in one has an entry there,
    a user's `file.py:Class` the defaults, and reading them imports no JAX."""
    import subprocess
    import sys

    from coocflow.systems.registry import BUILT_IN
    from coocflow.systems.traits import BUILT_IN as TRAITS, Traits, traits_of

    assert set(TRAITS) == set(BUILT_IN)
    assert traits_of("examples/saxe.py:SaxeNetwork") == Traits()
    assert [name for name in BUILT_IN if traits_of(name).run_page == "paper"] == ["eq1"]
    code = "import sys, coocflow.systems.traits, coocflow.listing, coocflow.compare; print('jax' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_a_system_file_imports_a_module_beside_it(tmp_path, monkeypatch):
    """`python file.py` can import what lies beside the file; a System's file could not (`No module named
    'helper'`, from the directory a user ran `coocflow` in)."""
    from coocflow.systems.registry import system_class

    (tmp_path / "decay_helper.py").write_text("RATE = 0.5\n")
    (tmp_path / "task.py").write_text(
        "import decay_helper\nimport jax.numpy as jnp\nfrom coocflow.systems import AbstractSystem\n\n"
        "class Task(AbstractSystem):\n    rate = decay_helper.RATE\n"
        "    @classmethod\n    def from_config(cls, config):\n        return cls()\n"
        "    def init(self, key):\n        return jnp.ones(2)\n    def data(self, seed):\n        return 0.0, 0.0\n"
        "    def loss(self, params, train):\n        return jnp.sum(params**2)\n"
        "    def observe(self, params, initial, train, test):\n        return {'loss': self.loss(params, train)}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path if p not in ("", ".")])  # not the cwd
    assert system_class("task.py:Task").rate == 0.5


def test_ls_shows_a_systems_settings_and_only_the_built_in_keys_it_says_it_reads():
    """`coocflow ls` listed every System with its own settings as `n=60` (data.n's default), read or not."""
    import dataclasses

    from coocflow.config import Config
    from coocflow.listing import config_line

    config = json.loads(json.dumps(dataclasses.asdict(Config()), default=list))
    regression = {**config, "system": "reg.py:Regression", "settings": {"top": 4.0}}
    assert config_line(regression).startswith("Regression top=4 gd lr=")
    assert config_line(regression, ["data.n"]).startswith("Regression n=60 top=4 gd lr=")
    assert config_line({**regression, "settings": {"n": 3}}, ["data.n"]).startswith("Regression data.n=60 n=3 ")
    assert config_line({**config, "system": "deep"}).startswith("deep n=60 L=5 d=64 ")
    assert config_line(config).startswith("n=60 L=5 d=64 m=128 m1=256 gd lr=")


def test_a_mistyped_listed_key_is_refused_in_one_line(tmp_path, monkeypatch):
    from coocflow.errors import ConfigError
    from coocflow.systems.registry import system_class

    (tmp_path / "listed.py").write_text(
        "from coocflow.systems import AbstractSystem\n\n"
        "class Listed(AbstractSystem):\n    listed_keys = ('data.nn',)\n"
        "    @classmethod\n    def from_config(cls, config):\n        return cls()\n"
        "    def init(self, key):\n        return 0.0\n    def data(self, seed):\n        return 0.0, 0.0\n"
        "    def loss(self, params, train):\n        return params\n"
        "    def observe(self, params, initial, train, test):\n        return {'loss': params}\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"Listed.listed_keys names 'data.nn', not a data or model key; did you mean data.n\?"):
        system_class("listed.py:Listed")
