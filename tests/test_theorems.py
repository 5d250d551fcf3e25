"""Theorems declared for any System (coocflow.verify): the calibration on a System whose truth is
known exactly (Saxe et al.'s two-layer linear network, examples/saxe.py), and a System defined here
with a small theorem taken through every command."""

import dataclasses
import math
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coocflow.cli import app
from coocflow.errors import ConfigError
from coocflow.verify import Bound, Computed, Identity, Limit, Ordering, Rate, Sign, Theorem
from coocflow.verify.judge import theorem_of, verify_theorem

ROOT = Path(__file__).resolve().parents[1]
SAXE = "examples/saxe.py:SaxeNetwork"


@pytest.fixture
def at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


def _claim(theorem: Theorem, claim_id: str):
    return next(claim for claim in theorem.claims if claim.id == claim_id)


def _verdicts(theorem: Theorem, folders, axis=None, values=None) -> dict[str, str]:
    return {claim.id: claim.verdict for claim in verify_theorem(theorem, folders, axis, values).claims}


def test_saxe_true_claims_pass_and_perturbed_ones_fail_at_the_examples_design(at_root, tmp_path):
    """The calibration the verifier owes beyond eq. (1): on the linear network whose mode strengths
    follow a closed-form sigmoid, every true claim passes at the example's design (5 strengths x 3
    seeds), with the power of its rate test printed; the same claims with the exponent 0.2 off (either
    side), the order reversed, the wrong limit or the closed form off by a factor 2 fail, not merely
    'inconclusive'."""
    out = tmp_path / "scaling"
    printed = cli("verify", "examples/saxe.toml", "--scaling", "system.top", "--out", str(out))
    record = json.loads((out / "verify.json").read_text())
    assert {c["id"]: c["verdict"] for c in record["claims"]} == {
        "S1": "pass", "S2": "pass", "S3": "pass", "S3.1": "pass", "S4": "pass", "I1": "pass"}
    rate = next(c for c in record["claims"] if c["id"] == "S4")
    assert rate["power"]["fails_wrong"] == 1.0 and rate["power"]["passes_true"] == 1.0
    assert "power: at this design (5 values x 3 seeds" in printed and "a claim 0.2 off" in printed
    assert record["axis"] == "settings.top" and [r["value"] for r in record["runs"]] == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert "report:" in cli("report", str(out))
    page = (out / "report.html").read_text()
    assert "modes are learned in order of their strength" in page and "fitted -1.000" in page
    assert "6/6 claims pass" in cli("ls", str(tmp_path))

    theorem = theorem_of(SAXE)
    folders = [Path(run["folder"]) for run in record["runs"]]
    values = [run["value"] for run in record["runs"]]
    wrong = {
        "S1": Ordering(id="S1", statement="reversed", quantities=("t3", "t2", "t1")),
        "S3.1": Limit(id="S3.1", statement="wrong limit", observable="mode_1", to=lambda system: 1.1 * system.s[0],
                      tol=1e-6),
        "S2": Identity(id="S2", statement="factor 2 off", left="t1", right="t1_twice"),
    }
    quantities = {**theorem.quantities,
                  "t1_twice": Computed(lambda run: 2 * theorem.quantities["t1_closed_form"].fn(run))}
    for exponent in (-0.8, -1.2):
        wrong[f"S4 {exponent}"] = dataclasses.replace(_claim(theorem, "S4"), id=f"S4 {exponent}", exponent=exponent)
    perturbed = dataclasses.replace(theorem, claims=tuple(wrong.values()), quantities=quantities)
    assert _verdicts(perturbed, folders, "settings.top", values) == {name: "fail" for name in wrong}

    single = _verdicts(theorem, folders[2:3])
    assert single == {"S1": "pass", "S2": "pass", "S3": "pass", "S3.1": "pass", "S4": "not applicable", "I1": "pass"}


def test_the_icl_theorem_passes_on_its_own_terms_and_its_perturbed_claims_fail(at_root, tmp_path):
    """Zhang, Frei and Bartlett's Theorem 4.1 (Lambda = I) on the population loss from their start:
    the preconditioner's limit, the limit risk, its Theta(1/N) rate, u's sign and the conserved balance
    pass at the example's design (N = 10..160 x 3 seeds); the rate 0.2 off and the limit of a wrong
    fourth moment (c_N = 1 + d/N, the '+1' forgotten) fail."""
    out = tmp_path / "icl"
    printed = cli("verify", "examples/icl_theorem.toml", "--scaling", "system.N", "--out", str(out))
    record = json.loads((out / "verify.json").read_text())
    assert {c["id"]: c["verdict"] for c in record["claims"]} == {
        "Z1": "pass", "Z2": "pass", "Z3": "pass", "Z4": "pass", "I1": "pass"}, printed
    assert "power:" in printed
    shown = " ".join(cli("show", str(out)).split())  # what the folder is and where to look
    assert f"{out}: a theorem folder, 5/5 claims pass" in shown and f"coocflow verify {out}" in shown
    power = next(c for c in record["claims"] if c["id"] == "Z3")["power"]
    assert power["fails_wrong"] >= 0.8 and power["passes_true"] >= 0.8, power  # the conventional power floor
    theorem = theorem_of("examples/icl_theorem.py:PopulationICL")
    folders, values = [Path(run["folder"]) for run in record["runs"]], [run["value"] for run in record["runs"]]
    wrong = {f"Z3 {p}": dataclasses.replace(_claim(theorem, "Z3"), id=f"Z3 {p}", exponent=p) for p in (-0.8, -1.2)}
    wrong["Z1 wrong"] = Limit(id="Z1 wrong", statement="tr Gamma -> d / (1 + d/N)", observable="gamma_trace",
                              to=lambda system: system.d / (1 + system.d / system.N), tol=1e-6)
    wrong["Z2 wrong"] = dataclasses.replace(_claim(theorem, "Z2"), id="Z2 wrong",
                                            to=lambda system: system.d**2 / (2 * (system.N + system.d)))
    perturbed = dataclasses.replace(theorem, claims=tuple(wrong.values()))
    assert _verdicts(perturbed, folders, "settings.N", values) == {name: "fail" for name in wrong}


def test_declarations_are_checked_when_declared():
    with pytest.raises(ConfigError, match=r"^theorem 'x': claim A names quantity 'q', which the theorem does not "
                                          r"declare \(quantities: none\)$"):
        Theorem(name="x", claims=(Sign(id="A", statement="q > 0", quantity="q"),))
    with pytest.raises(ConfigError, match=r"claim A needs premise 'P', which the theorem does not declare"):
        Theorem(name="x", claims=(Sign(id="A", statement="", quantity="q", premises=("P",)),),
                quantities={"q": Computed(lambda run: 1.0)})
    with pytest.raises(ConfigError, match=r"claim B: kind 'exact' is not one of order, upper bound"):
        Theorem(name="x", claims=(Rate(id="B", statement="", quantity="q", axis="data.n", exponent=1, kind="exact"),),
                quantities={"q": Computed(lambda run: 1.0)})
    with pytest.raises(ConfigError, match=r"claim C: a bound needs an upper or a lower constant"):
        Theorem(name="x", claims=(Bound(id="C", statement="", quantity="q"),), quantities={"q": Computed(lambda r: 1.0)})
    with pytest.raises(ConfigError, match=r"claim R is a rate along model.mm, which is not a config key; did you mean "
                                          r"model.m\?$"):
        Theorem(name="x", claims=(Rate(id="R", statement="", quantity="q", axis="model.mm", exponent=1),),
                quantities={"q": Computed(lambda run: 1.0)})
    with pytest.raises(ConfigError, match=r"claim R: its design's values .* must be positive and finite \(got -1.0\)"):
        Theorem(name="x", claims=(Rate(id="R", statement="", quantity="q", axis="settings.k", exponent=1,
                                       design=(-1.0, 1.0, 2.0)),), quantities={"q": Computed(lambda run: 1.0)})

    @dataclasses.dataclass(frozen=True)
    class Own:
        scale: float = 1.0

    along = Theorem(name="x", claims=(Rate(id="R", statement="", quantity="q", axis="settings.scael", exponent=1),),
                    quantities={"q": Computed(lambda run: 1.0)})
    assert along.setting_problems(Own) == ["claim R is a rate along settings.scael, which the System does not declare "
                                           "as a setting; did you mean settings.scale?"]
    assert along.setting_problems(None)[0].endswith("(its settings: none)")


DECAY = '''
"""Gradient flow on 1/2 k |x|^2: |x(t)|^2 = |x0|^2 exp(-2 k t), with its theorem (tests/test_theorems.py)."""
import math
from dataclasses import dataclass, field
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from coocflow.systems import AbstractSystem
from coocflow.verify import Computed, Crossing, EventTime, Identity, Limit, Premise, Rate, Sign, Theorem, ValueAt


@dataclass(frozen=True)
class DecaySettings:
    k: float = field(default=1.0, metadata={"help": "the decay rate"})
    size: int = field(default=3, metadata={"help": "entries of x"})


class Decay(AbstractSystem):
    k: float = eqx.field(static=True)
    size: int = eqx.field(static=True)
    name: ClassVar[str] = "decay"
    Settings: ClassVar[type] = DecaySettings

    @classmethod
    def from_config(cls, config):
        own = cls.settings_of(config)
        return cls(own.k, own.size)

    def init(self, key):
        return 1.0 + jax.random.uniform(key, (self.size,))

    def traced(self):
        return Decay(0.0, self.size)  # k reaches the loss through the data: one program for every k

    def data(self, seed):
        return jnp.asarray(self.k), jnp.asarray(self.k)

    def loss(self, params, train):
        return 0.5 * train * jnp.sum(params**2)

    def observe(self, params, initial, train, test):
        return {"loss": self.loss(params, train), "ratio": jnp.sum(params**2) / jnp.sum(initial**2)}

    @classmethod
    def theorem(cls):
        return THEOREM


THEOREM = Theorem(
    name="exponential decay",
    events={"quarter": Crossing("ratio", 0.25, rising=False)},
    quantities={"t_quarter": EventTime("quarter"), "t_exact": Computed(lambda run: math.log(2) / run.system.k),
                "loss_start": ValueAt("loss", "start")},
    premises=(Premise("K", "k > 0", lambda system, config: system.k > 0),),
    claims=(
        Identity(id="D1", statement="|x|^2 is a quarter of its start at ln 2 / k", left="t_quarter", right="t_exact",
                 rtol=1e-3),
        Limit(id="D2", statement="x converges to 0", observable="ratio", to=0.0, tol=1e-6, premises=("K",)),
        Sign(id="D3", statement="the loss starts positive", quantity="loss_start"),
        Rate(id="D4", statement="t_quarter ~ 1/k", quantity="t_quarter", axis="settings.k", exponent=-1.0,
             design=(0.5, 1.0, 2.0, 4.0)),
    ),
)
'''

DECAY_TOML = '''
name = "decay"
system = "{source}:Decay"
seeds = [0, 1]
[settings]
k = 1.0
[train]
method = "flow"
t_end = 20.0
[solver]
rtol = 1e-9
atol = 1e-12
[observe]
points = 120
start = 0.001
chunks = 6
checkpoint_every_s = 0.0
'''


def test_a_system_declared_in_a_test_runs_through_every_command_with_its_theorem(tmp_path):
    """A System written here (not an example) with a small theorem: run, an interrupted run refused
    after its source is edited and resumed with --accept-changed-code, check-reproduce, verify on the
    run and --scaling along its own setting (its runs trained on a local Ray instance), a sweep over
    it and the reports."""
    from coocflow.api import resolve_config, run_and_write

    source = tmp_path / "decay.py"
    source.write_text(DECAY)
    toml = tmp_path / "decay.toml"
    toml.write_text(DECAY_TOML.format(source=source))
    run = tmp_path / "run"
    cli("run", str(toml), "--out", str(run))
    printed = cli("verify", str(run))
    verdicts = {c["id"]: c["verdict"] for c in json.loads((run / "verify.json").read_text())["claims"]}
    assert verdicts == {"D1": "pass", "D2": "pass", "D3": "pass", "D4": "not applicable"}, printed
    assert "--scaling settings.k" in printed and "different code" not in printed
    full = " ".join(cli("verify", str(run), "--full").split())  # any terminal width
    measured = [(label, value) for claim in json.loads((run / "verify.json").read_text())["claims"]
                for label, values in claim["values"].items() if isinstance(values, dict)
                for value in values.values() if isinstance(value, float)]
    assert measured and all(f"{label}: " in full and f" {value:.4g}" in full for label, value in measured), (
        "--full shows what each claim measured on every seed run")
    import coocflow

    assert {c.id: c.verdict for c in coocflow.verify(run).claims} == verdicts, "the Python API judges it too"
    assert "reproduced" in cli("run", str(run), "--check-reproduce").lower()

    calls = {"n": 0}

    def stop(done: float) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_and_write(resolve_config(str(toml)), tmp_path / "cut", progress=stop, figures=False)
    source.write_text(source.read_text() + "\n# an edit\n")
    refused = CliRunner().invoke(app, ["run", "--resume", str(tmp_path / "cut")])
    assert refused.exit_code != 0 and "changed since this run was recorded" in str(refused.exception)
    cli("run", "--resume", str(tmp_path / "cut"), "--accept-changed-code", "--no-figures")
    noted = " ".join(cli("verify", str(run)).split())  # a run of the code before the edit: judged, with a note
    assert f"note: the run was trained with different code of its System than today's ({source}: sha256 " in noted
    assert {c["id"]: c["verdict"] for c in json.loads((run / "verify.json").read_text())["claims"]} == verdicts

    scaling = tmp_path / "scaling"
    import ray  # noqa: F401  (in the test extras)

    printed = cli("verify", str(toml), "--scaling", "settings.k", "--out", str(scaling), "--ray", "local",
                  "--workers", "1")  # the runs train as Ray tasks, the System read from its file there
    trained = [json.loads(f.read_text()) for f in sorted((scaling / "runs").glob("*/manifest.json"))]
    assert len(trained) == 4 and all(m["system_code"]["file"] == str(source) for m in trained)
    assert all("ray" in m["command"] for m in trained), "each run was written by a Ray worker"
    record = json.loads((scaling / "verify.json").read_text())
    assert {c["id"]: c["verdict"] for c in record["claims"]} == {"D1": "pass", "D2": "pass", "D3": "pass",
                                                                 "D4": "pass"}, printed
    assert "power:" in printed and (scaling / "verify.png").is_file()
    again = cli("verify", str(scaling))  # the folder `verify --scaling` wrote, judged again over the same runs
    assert "4 run(s) along settings.k = 0.5, 1, 2, 4" in again and "verdicts: 4 pass" in again, again
    assert json.loads((scaling / "verify.json").read_text())["runs"] == record["runs"]
    source.write_text(source.read_text() + "\n# another edit\n")
    refused = CliRunner().invoke(app, ["verify", str(toml), "--scaling", "settings.k", "--out", str(scaling)])
    assert refused.exit_code != 0 and "changed since this run was recorded" in str(refused.exception)
    cli("verify", str(toml), "--scaling", "settings.k", "--out", str(scaling), "--accept-changed-code")

    spec = tmp_path / "sweep.toml"
    spec.write_text(f'name = "decay-k"\nbase = "{toml}"\nseeds = 2\n[grid]\n"settings.k" = [0.5, 1.0, 2.0]\n')
    cli("sweep", str(spec), "--out", str(tmp_path / "sweep"), "--workers", "1", "--accept-changed-code")
    printed = cli("verify", str(tmp_path / "sweep"))
    record = json.loads((tmp_path / "sweep" / "verify.json").read_text())
    assert record["axis"] == "settings.k" and [r["value"] for r in record["runs"]] == [0.5, 1.0, 2.0]
    assert {c["id"]: c["verdict"] for c in record["claims"]}["D4"] == "pass", printed
    assert {c.id: c.verdict for c in coocflow.verify(tmp_path / "sweep").claims}["D4"] == "pass"
    for folder in (run, tmp_path / "sweep"):
        assert "report:" in cli("report", str(folder))
    page = (run / "report.html").read_text()
    assert "exponential decay" in page and "|x|^2 is a quarter of its start" in page, "the report shows the verdicts"


def test_a_system_that_starts_non_finite_says_so_and_nothing_judges_an_empty_run(tmp_path):
    """Every seed non-finite at t = 0 (by GD and by the flow): the run stops at once with one line saying
    nothing was observed (the flow is not left to reject steps until max_steps), its figure says so,
    `verify` refuses in one line (a verdict would be vacuous) and `report` writes its page."""
    from conftest import coocflow_here

    source = tmp_path / "decay.py"
    source.write_text(DECAY.replace("return 1.0 + jax.random.uniform(key, (self.size,))",
                                    "return jnp.full((self.size,), jnp.inf)"))
    toml = tmp_path / "decay.toml"
    toml.write_text(DECAY_TOML.format(source=source))
    for method, sets in (("flow", []), ("gd", ["train.method=gd", "train.t_end=0", "train.steps=50"])):
        out = tmp_path / method
        done = coocflow_here("run", toml, *[arg for key in sets for arg in ("--set", key)], "--out", out)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "2 of 2 seeds diverged (seed 0: loss is non-finite at t=0, the first observation, so nothing was " \
               "observed)" in " ".join(done.stderr.split()), done.stderr
        manifest = json.loads((out / "manifest.json").read_text())
        assert [seed["status"] for seed in manifest["per_seed"]] == ["diverged", "diverged"]
        assert (out / "training.png").is_file()
        judged = coocflow_here("verify", out)
        assert judged.returncode == 2 and "no seed was observed even once" in judged.stderr, judged.stderr
        assert "Traceback" not in judged.stderr
        assert coocflow_here("report", out).returncode == 0


def test_verify_says_which_seeds_diverged_before_its_verdicts(tmp_path):
    """GD at lr k > 2 on 1/2 k |x|^2 doubles |x| each step until it overflows: verify judges the seeds on
    what they observed before, and says so first."""
    from conftest import coocflow_here

    source = tmp_path / "decay.py"
    source.write_text(DECAY)
    toml = tmp_path / "decay.toml"
    toml.write_text(DECAY_TOML.format(source=source))
    out = tmp_path / "wild"
    sets = ["train.method=gd", "train.t_end=0", "train.steps=3000", "optimizer.lr=3.0"]
    assert coocflow_here("run", toml, *[arg for key in sets for arg in ("--set", key)], "--out", out,
                         "--no-figures").returncode == 2
    judged = coocflow_here("verify", out)
    assert judged.returncode == 0, judged.stderr
    import coocflow

    verdict = coocflow.verify(out)  # the Python API's tables, as for eq. (1)'s runs
    table = verdict.table().to_pydict()
    assert table["claim"] == ["D1", "D2", "D3", "D4"] and table["verdict"][3] == "not applicable"
    assert [sum(table[f"seed runs: {v}"][i] for v in ("pass", "fail", "fail outside premises", "vacuous", "inconclusive",
                                                       "not applicable", "no verdict")) for i in range(4)] == [2, 2, 2, 0]
    assert verdict.pass_rates()["D3"]["of"] == 2
    assert f"{out}: 2 of 2 seeds diverged (seed 0: loss non-finite at t=" in " ".join(judged.stdout.split())
    assert "their claims are judged on what they observed before" in " ".join(judged.stdout.split())


def test_verify_scaling_refuses_values_and_settings_it_cannot_sweep_before_any_folder(tmp_path):
    """A rate along the key is fit on the values' logarithms, so a value <= 0 is refused; a setting the
    System does not declare is refused: both in one line, before a run folder exists."""
    from conftest import coocflow_here

    source = tmp_path / "decay.py"
    source.write_text(DECAY)
    toml = tmp_path / "decay.toml"
    toml.write_text(DECAY_TOML.format(source=source))
    for args, message in ((["settings.k", "--values", "-1,1,2"], "--values: -1 is not a positive number, and the rate "
                                                                  "D4 along settings.k is fit on the values' logarithms"),
                          (["system.kk", "--values", "1,2"], "unknown setting 'settings.kk'")):
        out = tmp_path / "scaling"
        done = coocflow_here("verify", toml, "--scaling", *args, "--out", out)
        assert done.returncode == 2 and message in " ".join(done.stderr.split()), done.stderr
        assert not out.exists()
    bare = coocflow_here("run", toml, "--set", "k=2", "--out", tmp_path / "bare")
    assert bare.returncode == 2 and "unknown config key 'k': did you mean 'settings.k' (or system.k)" in bare.stderr


def test_a_theorem_reading_an_observable_the_system_lacks_is_refused_before_training(tmp_path):
    from conftest import coocflow_here

    source = tmp_path / "decay.py"
    source.write_text(DECAY.replace('Crossing("ratio"', 'Crossing("ratoi"'))
    toml = tmp_path / "decay.toml"
    toml.write_text(DECAY_TOML.format(source=source))
    for args in ([], ["--scaling", "settings.k"]):
        out = tmp_path / "out"
        done = coocflow_here("verify", toml, *args, "--out", out)
        assert done.returncode == 2, done.stderr
        assert ("event quarter reads observable 'ratoi', which the runs of" in done.stderr
                and "did you mean 'ratio'?" in done.stderr), done.stderr
        assert not out.exists()


def test_a_theorem_declares_its_own_sweep_and_verify_scaling_takes_it(at_root, tmp_path):
    """A theorem's `scaling` hook (`verify.scaling.ScalingDesign`), as eq. (1)'s width sweep uses it, for
    another System: Saxe's network swept along its own axis name `strength`, where every run moves
    `settings.top` and, with it, `train.t_end` (the run's time scale, 1/top). `design_for` gives the hook
    along its axes only; `api.run_scaling` trains the runs it names (with both keys moved) and the hook
    judges them with the theorem it is given; the true rate passes there too."""
    from coocflow.api import resolve_config, run_scaling
    from coocflow.verify.scaling import KeySweep, ScalingRequest, design_for

    class StrengthAndTime(KeySweep):
        axes = ("strength",)

        def plan(self, theorem, request):
            plan = super().plan(theorem, dataclasses.replace(request, axis="settings.top"))
            return dataclasses.replace(plan, title="strength sweep")

        def runs(self, plan, out):
            return [dataclasses.replace(run, config=run.config.replace({"train.t_end": 160.0 / run.value}))
                    for run in super().runs(plan, out)]

    theorem = dataclasses.replace(theorem_of(SAXE), name="Saxe et al., swept in strength", scaling=StrengthAndTime())
    design = design_for(theorem, "strength")
    assert isinstance(design, StrengthAndTime) and type(design_for(theorem, "settings.top")) is KeySweep
    request = ScalingRequest("examples/saxe.toml", "strength", None, None,
                             lambda overrides, n: resolve_config("examples/saxe.toml", overrides, None, n))
    plan = design.plan(theorem, request)
    assert plan.axis == "settings.top" and plan.values == [1.0, 2.0, 4.0, 8.0, 16.0] and plan.title == "strength sweep"
    done = run_scaling(theorem, design, plan, tmp_path / "strength")
    assert [(run.config.settings["top"], run.config.train.t_end) for run in done.runs] == [
        (1.0, 160.0), (2.0, 80.0), (4.0, 40.0), (8.0, 20.0), (16.0, 10.0)]
    assert all((run.folder / "manifest.json").is_file() for run in done.runs)
    record = json.loads((tmp_path / "strength" / "verify.json").read_text())
    assert record["theorem"] == theorem.name, "judged by the theorem given, not the one its System declares"
    assert {c["id"]: c["verdict"] for c in record["claims"]}["S4"] == "pass"
    assert done.report.findings() == []


def test_verify_refuses_a_bad_scaling_key_in_one_line(at_root):
    result = CliRunner().invoke(app, ["verify", "examples/saxe.toml", "--scaling", "settings"])
    assert result.exit_code != 0 and "not a config key to sweep" in str(result.exception)
    result = CliRunner().invoke(app, ["verify", "examples/saxe.toml", "--scaling", "data.n"])
    assert "the theorem declares no design along data.n" in str(result.exception)


def _synthetic_runs(theorem: Theorem, k_values, seeds=(0, 1), t_end=8.0):
    """Seed runs of |x|^2 = exp(-2 k t) on a 60-point log grid, without training (what judge reads)."""
    import numpy as np

    from coocflow.config import Config
    from coocflow.verify import SeedRun
    from coocflow.verify.judge import event_times

    class System:
        def __init__(self, k):
            self.k = k

    runs = []
    t = np.concatenate([[0.0], np.geomspace(1e-3, t_end, 59)])
    for k in k_values:
        seeds_of = []
        for seed in seeds:
            series = {"ratio": np.exp(-2 * k * t), "loss": 0.5 * k * np.exp(-2 * k * t)}
            system = System(k)
            seeds_of.append(SeedRun(seed=seed, t=t, series=series, system=system, config=Config(), initial=None,
                                    final=None, events=event_times(theorem, t, series, system)))
        runs.append(seeds_of)
    return runs


def test_the_judge_says_fail_outside_premises_inconclusive_and_vacuous_where_they_apply():
    """The verdicts other than pass and fail, on synthetic seed runs: a claim that fails only where a
    premise it needs is not met; an event that never happens; a bound beaten by far (vacuous) and the
    same bound on an identity (not vacuous); a limit that the run starts at; a located crossing to the
    interpolation's accuracy (a quarter of exp(-2kt) at ln 2 / k between observations 17% apart: the
    cubic through four of them errs by about 3e-5 relative, a straight line by about 7e-3)."""
    from coocflow.verify import Crossing, EventTime, Premise
    from coocflow.verify.judge import judge_on_runs

    theorem = Theorem(
        name="synthetic", events={"quarter": Crossing("ratio", 0.25, rising=False),
                                  "never": Crossing("ratio", 2.0)},
        quantities={"t_quarter": EventTime("quarter"), "t_never": EventTime("never"),
                    "exact": Computed(lambda run: math.log(2) / run.system.k),
                    "small": Computed(lambda run: 1e-9)},
        premises=(Premise("K1", "k is at least 1", lambda system, config: system.k >= 1),),
        claims=(Identity(id="located", statement="", left="t_quarter", right="exact", rtol=1e-4),),
    )
    runs = _synthetic_runs(theorem, (0.5, 2.0))
    met = {"K1": [False, True]}
    labels = ["k=0.5", "k=2"]

    def verdict(claim):
        return judge_on_runs(claim, theorem, runs, met, labels).verdict

    assert verdict(theorem.claims[0]) == "pass"
    assert verdict(Sign(id="a", statement="", quantity="t_quarter", positive=False, premises=("K1",))) == "fail"
    only_outside = Bound(id="b", statement="", quantity="t_quarter", upper=1.0, premises=("K1",))
    assert verdict(only_outside) == "fail outside premises"  # t_quarter = 1.39 > 1 at k = 0.5 only
    assert verdict(Sign(id="c", statement="", quantity="t_never")) == "inconclusive"
    assert verdict(Bound(id="d", statement="", quantity="small", upper=1.0)) == "vacuous"
    assert verdict(Bound(id="e", statement="", quantity="small", upper=1.0, evidence="identity")) == "pass"
    assert verdict(Limit(id="f", statement="", observable="ratio", to=1.0, tol=1e-6)) == "fail"
    assert verdict(Limit(id="g", statement="", observable="ratio", to=0.0, tol=1e-3)) == "pass"  # exp(-8) = 3.4e-4
    assert verdict(Limit(id="g2", statement="", observable="ratio", to=0.0, tol=1e-4)) == "fail"
    starts_there = Limit(id="h", statement="", observable="ratio", to=1.0, tol=2.0)
    assert verdict(starts_there) == "vacuous"
    assert verdict(Sign(id="i", statement="", quantity="t_quarter", evidence="diagnostic")) == "diagnostic"
    assert judge_on_runs(only_outside, theorem, runs, met, labels).tally == {"fail outside premises": 2, "pass": 2}
    # A relaxed premise: with K1 read as K1r (k > 1/4, met at k = 0.5 too) the failure counts against the claim.
    from coocflow.verify.judge import relaxed_met

    loose = dataclasses.replace(theorem, premises=(*theorem.premises, Premise(
        "K1r", "k is above 1/4", lambda system, config: system.k > 0.25, kind="relaxed", relaxes="K1")))
    relaxed = relaxed_met(loose, {**met, "K1r": [True, True]})
    assert relaxed == {"K1": [True, True], "K1r": [True, True]} and relaxed_met(theorem, met) == met
    assert judge_on_runs(only_outside, loose, runs, relaxed, labels).verdict == "fail"


def test_a_check_judges_what_the_theorems_reads_makes_of_each_seed():
    """A `Check`, for a claim the other kinds cannot say (here: the fitted decay rate of |x|^2 is 2k),
    receives the theorem's `reads` of each seed, and its outcome's verdict, premises and headroom give
    pass, fail, fail outside premises, inconclusive and vacuous as for the other claims; a diagnostic
    keeps its reason and a check that raises is one line naming it."""
    import numpy as np

    from coocflow.verify import Check, Outcome, Premise, bound_parts
    from coocflow.verify.judge import judge_on_runs

    seen = []

    def reads(run):
        seen.append(run.seed)
        return run.t[1:], np.log(np.asarray(run.series["ratio"])[1:]), run.system.k

    def rate_is(factor, rtol=1e-9, bound=None):
        def judge(view):
            t, log_ratio, k = view
            slope = -np.polyfit(t, log_ratio, 1)[0]
            gap = abs(slope - factor * k) / (factor * k)
            if bound is not None:
                return Outcome(slope, gap <= bound, f"slope {slope:.6g}, gap {gap:.2g}", f"gap <= {bound:g}",
                               bound_parts(gap=(gap, bound)))
            return Outcome(slope, gap <= rtol, f"slope {slope:.6g} against {factor:g} k = {factor * k:g}")
        return judge

    theorem = Theorem(name="synthetic", claims=(), reads=reads,
                      premises=(Premise("K1", "k is at least 1", lambda system, config: system.k >= 1),))
    runs = _synthetic_runs(theorem, (0.5, 1.0))
    met, labels = {"K1": [False, True]}, ["k=0.5", "k=1"]

    def judged(check):
        return judge_on_runs(check, theorem, runs, met, labels)

    right = judged(Check(id="a", statement="|x|^2 decays at 2k", judge=rate_is(2.0)))
    assert right.verdict == "pass" and "slope 1 against 2 k = 1" in right.sentence and seen == [0, 1, 0, 1]
    assert judged(Check(id="b", statement="", judge=rate_is(2.1))).verdict == "fail"
    below_one = Check(id="c", statement="", judge=lambda view: Outcome(view[2], view[2] >= 1, ""), premises=("K1",))
    assert judged(below_one).verdict == "fail outside premises"
    assert judged(Check(id="d", statement="", judge=lambda view: Outcome(None, None, "no fit"))).verdict == "inconclusive"
    assert judged(Check(id="e", statement="", judge=rate_is(2.0, bound=1e-3))).verdict == "vacuous"  # gap ~1e-15
    assert judged(Check(id="f", statement="", judge=rate_is(2.0, bound=1e-3), evidence="identity")).verdict == "pass"
    shown = judged(Check(id="g", statement="", judge=rate_is(2.0), evidence="diagnostic", no_verdict="a fitted constant"))
    assert shown.verdict == "diagnostic" and shown.sentence.endswith("No verdict: a fitted constant")
    with pytest.raises(ConfigError, match=r"claim h: a diagnostic check, and only a diagnostic, says in no_verdict"):
        Theorem(name="x", claims=(Check(id="h", statement="", judge=rate_is(2.0), evidence="diagnostic"),))
    raising = Check(id="i", statement="", judge=lambda view: view.missing)
    with pytest.raises(ConfigError, match=r"^theorem 'synthetic': check i failed on seed 0 \(AttributeError: .*\); fix"):
        judged(raising)


def test_a_declared_rate_is_judged_only_along_its_own_key_with_paired_seeds():
    from coocflow.verify import Crossing, EventTime
    from coocflow.verify.judge import judge_rate_claim

    theorem = Theorem(name="synthetic", events={"quarter": Crossing("ratio", 0.25, rising=False)},
                      quantities={"t": EventTime("quarter")},
                      claims=(Rate(id="r", statement="", quantity="t", axis="settings.k", exponent=-1.0),))
    claim, values = theorem.claims[0], [0.5, 1.0, 2.0, 4.0]
    runs = _synthetic_runs(theorem, values)
    assert judge_rate_claim(claim, theorem, "settings.k", values, runs, {}).verdict == "pass"
    off = dataclasses.replace(claim, exponent=-0.8)
    assert judge_rate_claim(off, theorem, "settings.k", values, runs, {}).verdict == "fail"
    elsewhere = judge_rate_claim(claim, theorem, "data.n", values, runs, {})
    assert elsewhere.verdict == "not applicable" and "--scaling settings.k" in elsewhere.sentence
    unpaired = runs[:3] + [runs[3][:1]]
    assert judge_rate_claim(claim, theorem, "settings.k", values, unpaired, {}).verdict == "inconclusive"


def test_a_declaration_that_reads_what_the_run_lacks_is_one_line(at_root, tmp_path):
    """An observable the System does not observe, or a quantity's function that raises: one line
    naming the declaration's part and the fix, not a traceback."""
    from coocflow.verify import Crossing, EventTime

    folder = tmp_path / "run"
    cli("run", "examples/saxe.toml", "--set", "seeds=[0]", "--set", "observe.points=40", "--out", str(folder))
    missing = Theorem(name="t", events={"e": Crossing("mode_9", 1.0)}, quantities={"q": EventTime("e")},
                      claims=(Sign(id="A", statement="", quantity="q"),))
    with pytest.raises(ConfigError, match=r"^theorem 't': event e reads observable 'mode_9', which the runs of "
                                          r"examples/saxe.py:SaxeNetwork do not have \(they have: .*\); fix the declaration$"):
        verify_theorem(missing, [folder])
    broken = Theorem(name="t", quantities={"q": Computed(lambda run: run.series["nothing"])},
                     claims=(Sign(id="A", statement="", quantity="q"),))
    with pytest.raises(ConfigError, match=r"^theorem 't': quantity q failed on seed 0 \(KeyError: 'nothing'\); fix"):
        verify_theorem(broken, [folder])


def test_a_rate_in_two_keys_is_judged_along_either_with_its_own_exponent():
    """quantity ~ k^-1 n^0.5 (`Rate.also`): along data.n the rate test judges the exponent 0.5 (a true
    one passes, 0.2 off fails), along a key it does not name it is not applicable; a sweep moving
    both keys predicts the sum of exponent times slope (eq. (1)'s m and m1 together)."""
    import numpy as np

    from coocflow.verify.declare import SeedRun
    from coocflow.verify.judge import judge_rate_claim

    def theorem(also):
        claim = Rate(id="R", statement="q ~ k^-1 n^p", quantity="q", axis="settings.k", exponent=-1.0, also=also)
        return Theorem(name="two keys", claims=(claim,), quantities={"q": Computed(lambda run: float(run.series["q"][0]))})

    ns = [10.0, 20.0, 40.0, 80.0, 160.0]
    noise = np.random.default_rng(0).normal(0.0, 0.01, (len(ns), 4))
    runs = [[SeedRun(seed=s, t=np.zeros(1), series={"q": np.array([n**0.5 * math.exp(noise[i, s])])}, system=None,
                     config=None, initial=None, final=None) for s in range(4)] for i, n in enumerate(ns)]
    true, wrong = theorem({"data.n": 0.5}), theorem({"data.n": 0.7})
    assert judge_rate_claim(true.claims[0], true, "data.n", ns, runs, {}).verdict == "pass"
    assert judge_rate_claim(wrong.claims[0], wrong, "data.n", ns, runs, {}).verdict == "fail"
    elsewhere = judge_rate_claim(true.claims[0], true, "data.L", ns, runs, {})
    assert elsewhere.verdict == "not applicable" and "--scaling settings.k" in elsewhere.sentence
    assert true.rate_axes() == ("settings.k", "data.n")
    assert true.claims[0].test_along({"settings.k": 1.0, "data.n": 2.0}).predicted == 0.0


def test_a_statement_is_judged_by_its_deciding_evidence():
    """A `Statement` (a claim as its source states it) takes the first of fail, ..., pass over its
    statements and identities: a failing refinement is shown, not decisive; a failing check decides;
    its own rate is judged along the sweep with the statement's premises; a check it names that the
    theorem lacks is refused when the theorem is declared."""
    import numpy as np

    from coocflow.verify import Check, Outcome, Premise, Statement
    from coocflow.verify.declare import SeedRun
    from coocflow.verify.judge import ClaimVerdict, judge_statement

    def check(id, evidence="statement"):
        return Check(id=id, statement="", evidence=evidence, judge=lambda run: Outcome(0, True, ""))

    rate = Rate(id="q_rate", statement="q ~ n^0.5", quantity="q", axis="data.n", exponent=0.5)
    statement = Statement(id="T", statement="the theorem", where="Thm 1", checks=("a", "r"), rates=(rate,),
                          premises=("P",))
    theorem = Theorem(name="t", claims=(check("a"), check("r", "refinement"), statement),
                      quantities={"q": Computed(lambda run: float(run.series["q"][0]))},
                      premises=(Premise("P", "always", lambda system, config: True),))
    ns = [10.0, 20.0, 40.0, 80.0]
    runs = [[SeedRun(seed=s, t=np.zeros(1), series={"q": np.array([n**0.5 * (1 + 0.01 * s)])}, system=None,
                     config=None, initial=None, final=None) for s in range(3)] for n in ns]
    met = {"P": [True] * len(ns)}

    def verdict(a, r):
        judged = {"a": ClaimVerdict("a", "", "Check", "statement", a, ""),
                  "r": ClaimVerdict("r", "", "Check", "refinement", r, "")}
        return judge_statement(statement, theorem, judged, "data.n", ns, runs, met)

    assert verdict("pass", "fail").verdict == "pass"
    assert verdict("fail", "pass").verdict == "fail"
    assert verdict("pass", "pass").values["evidence"] == {"a": "pass", "r": "pass", "q_rate": "pass"}
    assert "r: fail (refinement)" in verdict("pass", "fail").sentence
    with pytest.raises(ConfigError, match="names check 'missing'"):
        Theorem(name="t", claims=(Statement(id="S", statement="", checks=("missing",)),))


def test_a_statement_failing_only_outside_an_unstated_condition_holds_under_it():
    """A statement whose check fails only on runs where its unstated condition U is not met, and
    holds on those that meet it, is `holds under an unstated condition`; failing on a run that meets
    U too, it fails. Its own rate, failing over the sweep, is fitted again over the runs meeting U."""
    import numpy as np

    from coocflow.verify import Check, Outcome, Premise, Statement
    from coocflow.verify.declare import SeedRun
    from coocflow.verify.judge import ClaimVerdict, judge_statement

    ns = [10.0, 20.0, 40.0, 80.0, 160.0]
    met = {"U": [False, True, True, True, True]}
    runs = [[SeedRun(seed=s, t=np.zeros(1), series={"q": np.array([(n**0.5 if n > 10 else 30.0) * (1 + 0.01 * s)])},
                     system=None, config=None, initial=None, final=None) for s in range(3)] for n in ns]
    check = Check(id="a", statement="", judge=lambda run: Outcome(0, True, ""))
    rate = Rate(id="q_rate", statement="", quantity="q", axis="data.n", exponent=0.5)

    def judged(statement, failed_runs):
        theorem = Theorem(name="t", claims=(check, statement), quantities={"q": Computed(lambda run: float(run.series["q"][0]))},
                          premises=(Premise("U", "unstated", lambda system, config: True),))
        verdicts = {"a": ClaimVerdict("a", "", "Check", "statement", "fail", "", failed_runs=failed_runs)}
        return judge_statement(statement, theorem, verdicts, "data.n", ns, runs, met)

    checks_only = Statement(id="S", statement="", checks=("a",), unstated=("U",))
    assert judged(checks_only, [0]).verdict == "holds under an unstated condition"
    assert judged(checks_only, [0, 2]).verdict == "fail"
    assert judged(Statement(id="S", statement="", checks=("a",)), [0]).verdict == "fail"
    with_rate = Statement(id="S", statement="", checks=("a",), rates=(rate,), unstated=("U",))
    verdict = judged(with_rate, [0])
    assert verdict.values["evidence"]["q_rate"] == "fail" and verdict.verdict == "holds under an unstated condition"
    # The check itself, judged seed by seed: what that weighing counts (`ClaimVerdict.unstated`).
    from coocflow.verify.judge import judge_on_runs

    below = Check(id="b", statement="", judge=lambda run: Outcome(float(run.series["q"][0]), float(run.series["q"][0]) < 20, ""))
    theorem = Theorem(name="t", claims=(below, Statement(id="S", statement="", checks=("b",), unstated=("U",))),
                      premises=(Premise("U", "unstated", lambda system, config: True),))
    found = judge_on_runs(below, theorem, runs, met, [f"n={n:g}" for n in ns])
    assert found.tally == {"fail": 3, "pass": 12} and found.unstated == {"failed_unstated": 3, "passed_unstated_met": 12}
    alone = Theorem(name="t", claims=(below,), premises=(Premise("U", "unstated", lambda system, config: True),))
    assert judge_on_runs(below, alone, runs, met, [f"n={n:g}" for n in ns]).unstated == {}


def test_a_rate_claim_a_statement_names_is_fitted_again_where_the_unstated_condition_holds():
    """The same rule for a top-level `Rate` the statement names among its checks: it carries no
    failing runs, so it is refitted over the runs meeting the condition, not taken as holding there."""
    import numpy as np

    from coocflow.verify import Premise, Statement
    from coocflow.verify.declare import SeedRun
    from coocflow.verify.judge import judge_rate_claim, judge_statement

    ns = [10.0, 20.0, 40.0, 80.0, 160.0]
    met = {"U": [False, True, True, True, True]}

    def runs_with(bad):  # q = n^0.5, but 30 at the widths in `bad`
        return [[SeedRun(seed=s, t=np.zeros(1), series={"q": np.array([(30.0 if n in bad else n**0.5) * (1 + 0.01 * s)])},
                         system=None, config=None, initial=None, final=None) for s in range(3)] for n in ns]

    rate = Rate(id="r", statement="", quantity="q", axis="data.n", exponent=0.5)
    statement = Statement(id="S", statement="", checks=("r",), unstated=("U",))
    theorem = Theorem(name="t", claims=(rate, statement), quantities={"q": Computed(lambda run: float(run.series["q"][0]))},
                      premises=(Premise("U", "unstated", lambda system, config: True),))
    for bad, expected in (((10.0, 20.0), "fail"), ((10.0,), "holds under an unstated condition")):
        runs = runs_with(bad)  # only n = 10 misses U: an outlier at n = 20 is inside it
        judged = {"r": judge_rate_claim(rate, theorem, "data.n", ns, runs, {})}
        assert judged["r"].verdict == "fail"
        assert judge_statement(statement, theorem, judged, "data.n", ns, runs, met).verdict == expected


def test_a_check_stated_with_probability_and_premises_measured_on_each_seed():
    """A `Check` whose source states it with probability 1 - delta passes with one failing seed run of four
    (P(Binomial(4, 0.05) >= 1) = 0.19) and fails with two (0.014); a premise `on_seed` is met on a run only
    where every seed meets it, its value the worst seed's, and a malformed premise is one line."""
    from coocflow.verify import Check, Outcome, Premise, PremiseOutcome
    from coocflow.verify.judge import judge_on_runs, premise_verdict

    theorem = Theorem(name="synthetic", claims=())
    runs = _synthetic_runs(theorem, (0.5, 1.0))
    labels = ["k=0.5", "k=1"]

    def failing_on(bad):
        return Check(id="p", statement="", at_probability=0.05,
                     judge=lambda run: Outcome(run.seed, (run.system.k, run.seed) not in bad, f"seed {run.seed}"))

    one = judge_on_runs(failing_on({(1.0, 1)}), theorem, runs, {}, labels)
    assert one.verdict == "pass" and "fails on 1 of 4 seed runs, which its source allows" in one.sentence
    assert "P(Binomial(4, 0.05) >= 1) = 0.19" in one.sentence
    assert judge_on_runs(failing_on({(1.0, 1), (0.5, 0)}), theorem, runs, {}, labels).verdict == "fail"

    decays = Premise("D", "|x|^2 halves by t = 1", kind="assumed", threshold="ratio(1) <= 1/2",
                     on_seed=lambda run: PremiseOutcome(bool(run.value_at("ratio", 1.0) <= 0.5),
                                                        f"ratio(1) = {run.value_at('ratio', 1.0):.3g}",
                                                        badness=run.value_at("ratio", 1.0)))
    slow, fast = (premise_verdict(decays, None, None, seeds, [r.seed for r in seeds]) for seeds in runs)
    at_one = runs[0][0].value_at("ratio", 1.0)  # exp(-1), linear between observations
    assert (slow.met, fast.met) == (True, True) and slow.value == f"worst seed 0 of 2: ratio(1) = {at_one:.3g}"
    assert premise_verdict(decays, None, None, runs[0][:1], [0]).value == f"ratio(1) = {at_one:.3g}"
    strict = Premise("S", "", on_seed=lambda run: run.value_at("ratio", 1.0) <= 0.2)
    assert premise_verdict(strict, None, None, runs[0], [0, 1]).met is False
    assert premise_verdict(strict, None, None, runs[1], [0, 1]).met is True
    with pytest.raises(ConfigError, match="premise X: give exactly one of holds"):
        Theorem(name="x", claims=(), premises=(Premise("X", ""),))
    with pytest.raises(ConfigError, match="premise R relaxes 'Y', which the theorem does not declare"):
        Theorem(name="x", claims=(), premises=(Premise("R", "", holds=lambda s, c: True, kind="relaxed", relaxes="Y"),))


def test_an_unmeasured_claim_says_which_quantity_has_no_finite_value(tmp_path, monkeypatch):
    """A claim with no verdict on a seed said "an event it reads did not happen" even where its event happened
    and a computed quantity was infinite; it now names each quantity and why."""
    from conftest import coocflow_here

    source = tmp_path / "decay.py"
    source.write_text(DECAY.replace("Computed(lambda run: math.log(2) / run.system.k)",
                                    "Computed(lambda run: math.inf if run.system.k == 1.0 else math.log(2) / run.system.k)"))
    toml = tmp_path / "decay.toml"
    toml.write_text(DECAY_TOML.format(source=source))
    for name, t_end in (("long", "20.0"), ("short", "0.1")):
        assert coocflow_here("run", toml, "--set", f"train.t_end={t_end}", "--out", tmp_path / name,
                             "--no-figures").returncode == 0
    said = " ".join(coocflow_here("verify", tmp_path / "long").stdout.split())
    assert "incon. D1" in said and "(t_exact: infinite)" in said and "event it reads did not happen" not in said.split("D2")[0]
    said = " ".join(coocflow_here("verify", tmp_path / "short").stdout.split())
    assert "(t_quarter: no value, an event it reads did not happen or its function gave none; t_exact: infinite)" in said
    # the same infinity from NumPy warns: one line naming the file, not Python's two (the source echoed)
    warns = tmp_path / "decay_np.py"
    warns.write_text(DECAY.replace("Computed(lambda run: math.log(2) / run.system.k)",
                                   "Computed(lambda run: math.log(2) / (np.float64(run.system.k) - 1.0))")
                     .replace("import math\n", "import math\n\nimport numpy as np\n"))
    (tmp_path / "decay_np.toml").write_text(DECAY_TOML.format(source=warns))
    assert coocflow_here("run", tmp_path / "decay_np.toml", "--out", tmp_path / "np", "--no-figures").returncode == 0
    judged = coocflow_here("verify", tmp_path / "np")
    said = " ".join(judged.stdout.split())
    assert "note: decay_np.py:" in said and "warned while judging: RuntimeWarning: divide by zero" in said, said
    assert "RuntimeWarning" not in judged.stderr and "(t_exact: infinite)" in said
    # where Python was asked to make warnings errors (`python -W error`), the warning stays an error: the
    # quantity's function fails, said in one line, and no note turns it back into a warning
    import sys
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        monkeypatch.setattr(sys, "warnoptions", ["error"])
        monkeypatch.delenv("COLUMNS", raising=False)  # a pipe: the error whole, on one line
        strict = coocflow_here("verify", tmp_path / "np")
    assert strict.returncode == 2 and "warned while judging" not in strict.stdout
    assert "quantity t_exact failed on seed 0 (RuntimeWarning: divide by zero" in strict.stderr
    assert len(strict.stderr.strip().splitlines()) == 1, strict.stderr
