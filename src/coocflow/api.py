"""The Python API behind the CLI (and notebooks)."""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping, Sequence

from coocflow.config import (
    Config,
    _unknown_key,
    is_known_key,
    config_from_dict,
    current_key,
    flatten_dotted,
    load_toml,
    parse_override,
)
from coocflow.errors import CoocflowError, ConfigError, RunFolderError
from coocflow.experiments import EXPERIMENTS, get_experiment
from coocflow.storage import atomic_write_json, atomic_write_text
from coocflow.storage.folders import RunFolder, StudyFolder, read_json_object
from coocflow.storage.paths import does_not_exist, refuse_existing_out
from coocflow.storage.run_folder import read_metrics
from coocflow.systems.traits import traits_of

if TYPE_CHECKING:
    import numpy as np

    from coocflow.run import TrainedRun


def config_of_target(target: str | Path) -> Config:
    """The configuration a target names: an experiment, a config .toml, a run folder (its
    config.json) or a config.json. Anything else is refused with the nearest valid name."""
    text = str(target)
    path = Path(text)
    if text in EXPERIMENTS:
        return get_experiment(text).config()
    if path.is_dir():
        if RunFolder(path).config_file.is_file():
            return RunFolder(path).config()
        raise ConfigError(f"{text}: a folder without config.json, so not a run folder; pass an experiment, "
                          "a .toml, or a folder written by `coocflow run`")
    if path.is_file():
        if path.suffix == ".json":
            return config_from_dict(read_json_object(path))
        tree = load_toml(path)
        if not isinstance(tree.get("name", ""), str):
            raise ConfigError(f"{text}: name must be a string")
        tree.setdefault("name", path.stem)
        return config_from_dict(tree)
    if path.suffix in (".toml", ".json") or "/" in text or path.exists():
        raise ConfigError(does_not_exist(path))
    close = difflib.get_close_matches(text, list(EXPERIMENTS), n=1, cutoff=0.5)
    hint = f"did you mean '{close[0]}'? " if close else ""
    raise ConfigError(f"unknown experiment {text!r}: {hint}`coocflow experiments` lists them "
                      "(or pass a .toml, a run folder or its config.json)")


def resolve_config(target: str | Path | Config, overrides: Sequence[str] | Mapping[str, Any] = (),
                   seed: int | None = None, n_seeds: int | Sequence[int] | None = None) -> Config:
    """A target (see `config_of_target`), then `--set` overrides (strings `key=value` or a
    mapping), then `--seed` and `--seeds` (N consecutive seeds from the seed, or a list).

    The seeds an experiment, a .toml file or a run folder comes with are a default (the command
    line wins over the file, as for every other key): `--seeds N` replaces them, and `--seed S`
    alone keeps their number and starts them at S. Seeds listed on the same command line
    (`--set seeds=[...]`) conflict with `--seed`/`--seeds` and are refused rather than one silently
    winning."""
    config = target if isinstance(target, Config) else config_of_target(target)
    if isinstance(overrides, Mapping):
        parsed = {current_key(key): value for key, value in overrides.items()}
        for key in parsed:
            if not is_known_key(key):
                raise _unknown_key(key)
    else:
        try:
            parsed = dict(parse_override(text) for text in overrides)
        except ConfigError as err:
            raise _as_own_setting(err, config, overrides) from None
    if parsed:
        base = config
        config = config.replace(parsed)
        if _names_a_run(target) and "name" not in parsed:
            config = config.replace({"name": variant_name(base, config)})
    listed = list(config.seeds)
    if listed and (n_seeds is not None or seed is not None) and "seeds" in parsed:
        flag = "--seeds" if n_seeds is not None else "--seed"
        raise ConfigError(f"{flag}: this command already lists seeds = {listed}; drop {flag}, or drop the list "
                          "(or replace it with --set seeds=[...])")
    if seed is not None:
        config = config.replace({"seed": seed})
    if n_seeds is None and seed is not None and listed:
        n_seeds = len(listed)
    if n_seeds is not None:
        if isinstance(n_seeds, int):
            if n_seeds < 1:
                raise ConfigError(f"--seeds: must be at least 1 (got {n_seeds})")
            n_seeds = list(range(config.seed, config.seed + n_seeds))
        config = config.replace({"seeds": list(n_seeds)})
    return _checked(config)


def _as_own_setting(err: ConfigError, config: Config, overrides: Sequence[str]) -> ConfigError:
    """An unknown bare key (`--set scale=2`) that names a setting of the config's System: the error says
    `settings.scale` (the built-in keys' did-you-mean cannot know a System's own names); else `err`."""
    from coocflow.systems.registry import system_class  # lazy: a System's file is imported only here

    bare = [text.split("=", 1)[0].strip() for text in overrides if "=" in text]
    try:
        settings = system_class(config.system).Settings
    except CoocflowError:
        return err
    names = {f.name for f in dataclasses.fields(settings)} if settings is not None else set()
    for key in bare:
        if "." not in key and key in names and repr(key) in str(err):
            return ConfigError(f"unknown config key {key!r}: did you mean 'settings.{key}' (or system.{key}), a setting "
                               f"of {config.system}?")
    return err


def _checked(config: Config) -> Config:
    """`config`, once the system it names has read and validated its own settings
    (`AbstractSystem.from_config`, `check_training`), so a bad one is refused at the door, before any
    folder exists; where they are `Config`'s own (`Traits.checked_by_config`: eq. (1)) only for
    `train.stop_at`, `observe.locate` and `observe.only`, which name its events and observables."""
    if not traits_of(config.system).checked_by_config or config.train.stop_at or config.observe.locate or \
            config.observe.only:
        from coocflow.systems.registry import system_of  # lazy: defers JAX, 1-3.6 s

        system_of(config)
    return config


def _names_a_run(target) -> bool:
    """Whether a target is a run folder or a config.json (a finished run's configuration): with
    overrides it makes a variant of that run (`variant_name`)."""
    if isinstance(target, Config) or str(target) in EXPERIMENTS:
        return False
    path = Path(str(target))
    return path.is_dir() or path.suffix == ".json"


def _changed_keys(before: Config, after: Config) -> dict[str, Any]:
    """The dotted keys whose value differs, with the new values (name and seeds left out)."""
    old, new = flatten_dotted(before.to_dict()), flatten_dotted(after.to_dict())
    return {key: value for key, value in new.items() if old.get(key) != value and key not in ("name", "seed", "seeds")}


def variant_name(before: Config, after: Config) -> str:
    """The name of a variant of a run: the run's name and what changed, e.g. `paper-lr0.005` or
    `paper-flow` (a variant never passes for the run it started from)."""
    changed = _changed_keys(before, after)
    if not changed:
        return before.name
    parts = [value if isinstance(value, str) else f"{key.rsplit('.', 1)[-1]}{value:g}"
             if isinstance(value, (int, float)) and not isinstance(value, bool) else f"{key.rsplit('.', 1)[-1]}{value}"
             for key, value in list(changed.items())[:3]]
    return "-".join([before.name, *parts]).replace(" ", "").replace("/", "_")[:80]


def time_axis_changes(before: Config, after: Config) -> list[str]:
    """What a variant moves on the time axis, e.g. `t_end 300 -> 150` (the flow time a discrete
    run reaches is lr x steps, so a new lr moves it) and the flow's first observed time."""
    changes = []
    if before.t_end != after.t_end:
        changes.append(f"t_end {before.t_end:g} -> {after.t_end:g}")
    if after.is_flow and before.is_flow and before.flow_start != after.flow_start:
        changes.append(f"first observed time {before.flow_start:g} -> {after.flow_start:g}")
    return changes


def run_and_write(config: Config, out: Path, force: bool = False,
                  progress: Callable[[float], None] | None = None,
                  figures: bool | Sequence[str] = True) -> tuple[Path, "TrainedRun"]:
    """Train `config` and write its run folder (with figures unless `figures` is false), whatever
    its System (`coocflow.run`: a `TrainedRun` of the class the System names).

    The folder exists from the start, holding config.json and the checkpoints of the run in
    progress, so a killed run continues with `resume_run(out)`.
    """
    from coocflow.run import begin_run_folder  # lazy: defers JAX, 1-3.6 s

    begin_run_folder(out, config, force=force)
    return _train_and_write(config, Path(out), progress, figures)


def _train_and_write(config: Config, out: Path, progress: Callable[[float], None] | None,
                     figures: bool | Sequence[str]) -> tuple[Path, "TrainedRun"]:
    """Train into the begun folder `out` (checkpointing it) and write the run there
    (`run.train_and_write`: an interrupt from the end of training to the folder's rename waits)."""
    from coocflow.run import train_and_write  # lazy: defers JAX, 1-3.6 s

    return out, train_and_write(config, out, progress, figures)


def study_of(config: Config) -> str | None:
    """The study a configuration runs: the study of the experiment it is named after (`deep`,
    `markov`, ...), else None (a run of eq. (1)). The CLI and `coocflow.run` both decide by it, so
    they write the same folder for every experiment."""
    experiment = EXPERIMENTS.get(config.name)
    return experiment.study if experiment is not None else None


def run_study(config: Config, out: Path, force: bool = False, progress: Callable[[str], None] | None = None,
              resume: bool = False) -> tuple[Path, dict]:
    """Run the study `config` names into `out` and write its config.json, manifest.json and
    summary.md; returns the folder and the manifest's record of trained variants (empty for the
    studies that do not checkpoint). The deep and markov studies begin the folder with config.json
    and study.json and train under its lock with checkpoints, so `resume` continues one that was
    interrupted."""
    from coocflow.experiments.catalog import STUDIES, check_study_config  # lazy: defers JAX, 1-3.6 s
    from coocflow.experiments.study_folder import (  # lazy: defers JAX, 1-3.6 s
        RESUMABLE_STUDIES,
        begin_study_folder,
        clear_study_progress,
        study_record,
    )
    from coocflow.storage.checkpoint import run_lock  # lazy: defers JAX, 1-3.6 s
    from coocflow.storage.provenance import provenance  # lazy: defers JAX, 1-3.6 s

    study = study_of(config)
    if study is None:
        raise ConfigError(f"{config.name}: not a study; `coocflow experiments` lists the studies")
    out = Path(out)
    resumable = study in RESUMABLE_STUDIES
    if not resumable:
        refuse_existing_out(out, force)
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
    elif not resume:
        check_study_config(study, config)
        begin_study_folder(out, config, study, force)
    start = time.perf_counter()
    with run_lock(out) if resumable else contextlib.nullcontext():
        result = STUDIES[study](config, out, progress)
        record = study_record(out) if resumable else {}
        folder = StudyFolder(out)
        atomic_write_json(folder.config_file, config.to_dict())
        atomic_write_json(folder.manifest_file, {"study": config.name, "wall_s": time.perf_counter() - start,
                                                 "figures": [p.name for p in result.figures], "rows": result.rows,
                                                 **record, **provenance()})
        atomic_write_text(folder.summary_file, result.summary)
        if resumable:
            clear_study_progress(out)
    return out, record


def execute(config: Config, out: Path, force: bool = False, figures: bool | Sequence[str] = True) -> Path:
    """Train `config` and write its folder: the study it names (`study_of`) or a run of eq. (1)
    (`run_and_write`); what `coocflow run` and `coocflow.run` both do. A study draws its own figures,
    so `figures` other than the default is refused there, as `coocflow run NAME --no-figures` is."""
    if study_of(config) is not None:
        if figures is not True:
            raise ConfigError(f"figures={figures!r}: {config.name} is a study, which writes its own figures; "
                              "leave figures at its default")
        return run_study(config, out, force=force)[0]
    return run_and_write(config, out, force=force, figures=figures)[0]


def missing_figures(folder: Path) -> list[str]:
    """The figures of a complete run folder that are not there (an interrupt while they were
    drawn); none for a study, whose manifest is written after its figures."""
    folder = Path(folder)
    manifest = RunFolder(folder).manifest()
    if "study" in manifest:
        return []
    return [name for name in manifest.get("figures", []) if not (folder / name).is_file()]


def draw_figures(folder: Path) -> list[Path]:
    """Draw a complete run folder's figures (those its manifest lists) from its metrics table, as
    the run would have (what `coocflow run --resume` does for a run interrupted while drawing them)."""
    from coocflow.run import draw_figures as draw  # lazy: defers JAX, 1-3.6 s

    return draw(Path(folder))


@dataclass(frozen=True)
class RunOutcome:
    """What `ensure_run` did to a folder: `reused` a complete run of the same training
    configuration, `resumed` an interrupted one, or `trained` it afresh; `metrics` is the run's
    metrics table either way (read back from the folder when it was reused)."""

    folder: Path
    how: Literal["reused", "resumed", "trained"]
    metrics: dict[str, np.ndarray]


def training_part(config: dict) -> dict:
    """What of a configuration (its stored dict) the training reads, so two runs that agree here
    are the same run: less its `verify` section (the declared times C_T1, k and Lemma 4.3's C read
    a finished run), less `solver` for a discrete method, and less `optimizer` for the flow with
    its own end time (`train.t_end` > 0; at 0 it ends at optimizer.lr x train.steps). A folder
    written before configurations named their `system` trained eq. (1), so `system = "eq1"` counts
    as absent."""
    train = config.get("train", {})
    flow = train.get("method") == "flow"
    unread = {"verify", "optimizer" if flow and train.get("t_end", 0) > 0 else None, None if flow else "solver"}
    return {key: value for key, value in config.items()
            if key not in unread and not (key == "system" and value == "eq1")}


ACCEPT_CHANGED_CODE = "--accept-changed-code"
"""The flag of `run --resume`, `run --check-reproduce` and `sweep` that continues, re-checks or reuses a
run whose System's code changed since it was recorded."""


def refuse_changed_code(folder: Path, recorded: dict | None, system: str, doing: str, accept: bool = False,
                        now: dict | None = None) -> None:
    """One line naming what changed when the code of `system` (`now`, else read here:
    `systems.registry.system_code`) differs from what the run in `folder` recorded, unless `accept`:
    continuing or reusing it would mix two dynamics in one folder, with nothing recorded."""
    if accept or not recorded:
        return
    from coocflow.systems.registry import code_change, system_code  # lazy: defers JAX, 1-3.6 s

    change = code_change(recorded, now or system_code(system))
    if change:
        raise RunFolderError(f"{folder}: the code of system {system} changed since this run was recorded ({change}); "
                             f"restore it, or pass {ACCEPT_CHANGED_CODE} to {doing} with the new code")


def recorded_code(run: RunFolder) -> dict | None:
    """The System code a run recorded: in manifest.json when complete, else in its checkpoint."""
    if run.complete:
        return run.manifest().get("system_code")
    meta = run.checkpoint_meta() if run.in_progress else None
    return (meta or {}).get("system_code")


def ensure_run(config: Config, folder: Path, accept_changed_code: bool = False) -> RunOutcome:
    """The one resume-or-run decision every job makes (a sweep's job, a width of a width sweep):
    reuse `folder` when it holds a complete run of the same training configuration (writing the new
    `verify` declarations into its config.json), resume it when it holds an interrupted run of this
    configuration (training afresh if its checkpoint cannot be used), train into it otherwise.
    Figures are not drawn (the jobs' callers draw their own)."""
    folder, run = Path(folder), RunFolder(folder)
    wanted = json.loads(json.dumps(config.to_dict()))
    found = _stored_record(run) if run.complete or run.in_progress else None
    if found is not None and training_part(found) == training_part(wanted):
        refuse_changed_code(folder, recorded_code(run), config.system, "reuse it", accept_changed_code)
        if run.complete:
            _declare(run, wanted)
            return RunOutcome(folder, "reused", read_metrics(run.metrics_file))
        try:
            _, result = resume_run(folder, figures=False, accept_changed_code=True)  # checked above
            _declare(run, wanted)
            return RunOutcome(folder, "resumed", result.table())
        except RunFolderError:
            pass
    _, result = run_and_write(config, folder, force=True, figures=False)
    return RunOutcome(folder, "trained", result.table())


@dataclass(frozen=True)
class ScalingOutcome:
    """`run_scaling`'s result: the runs of the sweep and the theorem's report on them (`render.Report`,
    its files written)."""

    runs: list
    report: Any


def run_scaling(theorem, design, plan, out: Path, target: str = "", accept_changed_code: bool = False,
                progress: Callable[[Any], None] | None = None, train: Callable[[list], None] | None = None
                ) -> ScalingOutcome:
    """`verify --scaling`'s one path for every System and theorem: the `design`'s runs of `plan` under
    `out` (`verify.scaling`), each reused when complete, resumed when interrupted, trained otherwise
    (`ensure_run`; `train`, when given, trains them first, e.g. as Ray tasks), then judged by the design.
    `progress` hears each run as it is reached. The folder's page is `coocflow report`'s
    (`report.write.write_report`), which `verify --scaling` writes next."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    runs = design.runs(plan, out)
    if train is not None:
        train(runs)
    for run in runs:
        if progress is not None:
            progress(run)
        ensure_run(run.config, run.folder, accept_changed_code)
    return ScalingOutcome(runs, design.judge(theorem, plan, runs, out, target))


def _declare(run: RunFolder, wanted: dict) -> None:
    """Write the wanted `verify` declarations into a reused or resumed run's config.json (only when
    they differ, so a folder that already says them is left alone)."""
    found = _stored_record(run)
    if found is not None and found.get("verify") != wanted.get("verify"):
        atomic_write_json(run.config_file, {**found, "verify": wanted["verify"]})


def _stored_record(run: RunFolder) -> dict | None:
    """A complete run's config.json in the current format (a format-1 one read through its
    migration), or None when it is not a readable config."""
    try:
        return json.loads(json.dumps(run.config().to_dict()))
    except (ConfigError, RunFolderError):
        return None


def resumable_config(folder: Path) -> Config | None:
    """The config of an interrupted run folder, or None when the run there is complete."""
    folder = Path(folder)
    if not folder.is_dir():
        raise RunFolderError(f"--resume {folder}: no such folder; pass the --out folder of the interrupted run")
    run = RunFolder(folder)
    if run.manifest_file.exists():
        return None
    if not run.config_file.is_file():
        raise RunFolderError(f"--resume {folder}: not a folder `coocflow run` started (no {run.CONFIG}); "
                             "of the studies only deep and markov checkpoint, so re-run the others")
    return run.config()


def resume_run(folder: Path, progress: Callable[[float], None] | None = None,
               figures: bool | Sequence[str] = True, accept_changed_code: bool = False) -> tuple[Path, "TrainedRun"]:
    """Continue an interrupted run from its last checkpoint (or from t = 0 if it has none) and
    write the run folder; the result equals the uninterrupted run's bit for bit. A System whose code
    changed since the checkpoint is refused unless `accept_changed_code`."""
    config = resumable_config(folder)
    if config is None:
        raise RunFolderError(f"--resume {folder}: the run is complete (manifest.json exists); nothing to resume")
    refuse_changed_code(Path(folder), recorded_code(RunFolder(folder)), config.system, "resume it",
                        accept_changed_code)
    return _train_and_write(config, Path(folder), progress, figures)


def describe(c: Config) -> str:
    """One line saying what a run will do (its `TrainedRun` class's title)."""
    from coocflow.run import run_type  # lazy: defers JAX, 1-3.6 s

    return f"[bold]{c.name}[/]: {run_type(c.system).title(c).split(': ', 1)[1]}, {c.dtype}"
