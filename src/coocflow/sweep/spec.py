"""A sweep: a base configuration, axes to vary, seeds; expanded into jobs.

The spec is TOML:

    name = "width-and-length"
    base = "paper"              # an experiment name, or a config TOML (relative to this file)
    seeds = 8                   # a count (seeds 0..N-1) or a list of seeds
    checks = true               # the paper's checks per seed in the summary (false: leave them to verify)
    [set]                       # overrides applied to every job
    "train.method" = "flow"
    [grid]                      # every combination of these values
    "model.m" = [32, 64, 128]
    "data.L" = [4, 5, 6]
    [zip]                       # lists of one length, varied together (one more grid axis)
    "model.m1" = [64, 128, 256]

A job is one configuration with all its seeds: it runs as one vmapped ensemble. Every job's
configuration is built and validated when the spec is read, so a bad value fails before anything
runs, with the axis named.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coocflow.config import (
    BUILT_IN_SYSTEMS,
    NAME_FIX,
    Config,
    all_keys,
    is_known_key,
    config_from_dict,
    current_key,
    flatten_dotted,
    load_toml,
    unsafe_name_reason,
)
from coocflow.errors import ConfigError
from coocflow.experiments import EXPERIMENTS
from coocflow.systems.traits import traits_of

SPEC_KEYS = ("name", "base", "seeds", "set", "grid", "zip", "checks")


@dataclass(frozen=True)
class Job:
    """One configuration of the sweep: its axis values and its validated config."""

    id: str
    axes: dict[str, Any]
    config: Config

    def to_dict(self) -> dict:
        return {"id": self.id, "axes": self.axes, "config": self.config.to_dict()}


@dataclass(frozen=True)
class SweepSpec:
    name: str
    base: str
    seeds: tuple[int, ...]
    set: dict[str, Any]
    grid: dict[str, list]
    zip: dict[str, list]
    jobs: tuple[Job, ...]
    checks: bool = True
    """Whether each job's summary rows carry the paper's checks per seed (`check.NAME`): about 20 ms
    a seed of eq. (1), half of what a run of a large T1 table costs; `checks = false` leaves them to
    `coocflow verify` of the sweep folder."""

    @property
    def axes(self) -> list[str]:
        return list(self.grid) + list(self.zip)

    def to_dict(self) -> dict:
        return {"name": self.name, "base": self.base, "seeds": list(self.seeds), "set": self.set,
                "grid": self.grid, "zip": self.zip, **({} if self.checks else {"checks": False})}

    @property
    def programs(self) -> int:
        """How many compiled programs its jobs should need (`program_key`)."""
        return len({program_key(job.config) for job in self.jobs})

    @property
    def fingerprint(self) -> str:
        """A hash of the resolved jobs: a sweep folder only resumes the sweep that made it."""
        text = json.dumps([job.to_dict() for job in self.jobs], sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _where(path: Path | None) -> str:
    return f"{path}: " if path else ""


def _check_key(key: str, section: str, path: Path | None) -> None:
    """Refuse what is not a config key; a format-1 name (`train.lr`) counts as its new one, and the
    job keeps the name as written, so an old spec resumes its own sweep folder."""
    if not is_known_key(current_key(key)):
        close = difflib.get_close_matches(key, all_keys(), n=1)
        hint = f"did you mean '{close[0]}'?" if close else "see `coocflow keys`"
        raise ConfigError(f"{_where(path)}[{section}] {key!r} is not a config key: {hint}")
    if key in ("seed", "seeds"):
        raise ConfigError(f"{_where(path)}[{section}] {key!r}: give seeds with the top-level `seeds = N` instead")


def _values(section: str, key: str, values: Any, path: Path | None) -> list:
    if not isinstance(values, list) or not values:
        raise ConfigError(f"{_where(path)}[{section}] {key!r} must be a non-empty list of values, e.g. {key!r} = [1, 2]")
    return values


def program_key(config: Config) -> str:
    """A hash of what shapes a job's compiled programs: its config less the keys its System's
    programs take as inputs (`AbstractSystem.program_inputs`), with the number of its seeds. Jobs
    with one key should share one program (eq. (1)'s Gram space across widths and init scales)."""
    from coocflow.systems.registry import system_class  # lazy: defers JAX, 1-3.6 s

    inputs = set(system_class(config.system).program_inputs(config))
    shaping = {key: value for key, value in flatten_dotted(config.to_dict()).items() if key not in inputs}
    text = json.dumps({**shaping, "seed_count": len(config.seed_list)}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def job_id(axes: dict[str, Any]) -> str:
    """A readable, filesystem-safe folder name, e.g. `model.m=64_data.L=5`."""
    if not axes:
        return "base"
    return "_".join(re.sub(r"[^A-Za-z0-9._=+-]", "-", f"{key}={value}") for key, value in axes.items())


def spec_from_dict(tree: dict[str, Any], path: Path | None = None) -> SweepSpec:
    """Validate a spec and expand it into jobs (each a validated config)."""
    unknown = [key for key in tree if key not in SPEC_KEYS]
    if unknown:
        raise ConfigError(f"{_where(path)}unknown sweep key '{unknown[0]}': a sweep has {', '.join(SPEC_KEYS)}")
    name = tree.get("name", path.stem if path else "sweep")
    reason = unsafe_name_reason(name) if isinstance(name, str) else "is not a string"
    if reason:
        raise ConfigError(f"{_where(path)}name: {name!r} {reason}; {NAME_FIX}")
    base = tree.get("base", "paper")
    if not isinstance(base, str):
        raise ConfigError(f"{_where(path)}base: expected an experiment name or a config .toml path, got {base!r}")
    if base in EXPERIMENTS:
        study = EXPERIMENTS[base].study
        if study and study not in BUILT_IN_SYSTEMS:
            raise ConfigError(f"{_where(path)}base: {base!r} is a multi-run study; sweep a single-run experiment "
                              "such as paper, deep, markov or a config file")
        base_config = EXPERIMENTS[base].config()
    else:
        base_path = Path(base) if path is None or Path(base).is_absolute() else path.parent / base
        if not base_path.is_file():
            raise ConfigError(f"{_where(path)}base: {base!r} is neither an experiment ({', '.join(EXPERIMENTS)}) "
                              "nor a config file")
        base_config = config_from_dict({"name": base_path.stem, **load_toml(base_path)})
    checks = tree.get("checks", True)
    if not isinstance(checks, bool):
        raise ConfigError(f"{_where(path)}checks: expected true or false (the paper's checks per seed in the "
                          f"summary table), got {checks!r}")
    seeds_value = tree.get("seeds", 1)
    if isinstance(seeds_value, int) and not isinstance(seeds_value, bool) and seeds_value >= 1:
        seeds = tuple(range(seeds_value))
    elif isinstance(seeds_value, list) and seeds_value and all(isinstance(s, int) and s >= 0 for s in seeds_value):
        seeds = tuple(seeds_value)
    else:
        raise ConfigError(f"{_where(path)}seeds: expected a count >= 1 or a list of seeds >= 0, got {seeds_value!r}")
    sections = {}
    for section in ("set", "grid", "zip"):
        table = tree.get(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{_where(path)}[{section}]: expected a table of \"key\" = value lines")
        for key in table:
            _check_key(key, section, path)
        sections[section] = dict(table)
    grid = {k: _values("grid", k, v, path) for k, v in sections["grid"].items()}
    zipped = {k: _values("zip", k, v, path) for k, v in sections["zip"].items()}
    if len({len(v) for v in zipped.values()}) > 1:
        raise ConfigError(f"{_where(path)}[zip]: every list must have the same length (got "
                          + ", ".join(f"{k}: {len(v)}" for k, v in zipped.items()) + ")")
    named = {section: {current_key(key) for key in table} for section, table in sections.items()}
    both = named["grid"] & named["zip"] | (named["set"] & (named["grid"] | named["zip"]))
    if both:
        raise ConfigError(f"{_where(path)}'{sorted(both)[0]}' appears in more than one of [set], [grid], [zip]")
    try:
        common = base_config.replace({**sections["set"], "seeds": list(seeds), "name": name})
    except ConfigError as err:
        raise ConfigError(f"{_where(path)}[set]: {err}") from None
    zip_rows = [dict(zip(zipped, row)) for row in zip(*zipped.values())] if zipped else [{}]
    jobs, seen = [], {}
    for combination in itertools.product(*grid.values()):
        for zip_row in zip_rows:
            axes = {**dict(zip(grid, combination)), **zip_row}
            try:
                config = common.replace({**axes, "name": f"{name}/{job_id(axes)}"})
            except ConfigError as err:
                raise ConfigError(f"{_where(path)}job {job_id(axes)}: {err}") from None
            identifier = job_id(axes)
            if not traits_of(config.system).checked_by_config or config.train.stop_at or config.observe.only:
                from coocflow.systems.registry import system_of  # lazy: defers JAX, 1-3.6 s

                try:
                    system_of(config)
                except ConfigError as err:
                    raise ConfigError(f"{_where(path)}job {identifier}: {err}") from None
            if checks and config.observe.only:
                raise ConfigError(f"{_where(path)}observe.only: the paper's checks in the summary read every observable; "
                                  "add `checks = false` at the top of the spec (verify a full run instead)")
            if identifier in seen:
                raise ConfigError(f"{_where(path)}two jobs share the folder name {identifier}; make the axis values distinct")
            seen[identifier] = True
            jobs.append(Job(identifier, axes, config))
    return SweepSpec(name, base, seeds, sections["set"], grid, zipped, tuple(jobs), checks)


def load_spec(path: Path) -> SweepSpec:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such sweep spec; pass a .toml file with [grid] axes")
    return spec_from_dict(load_toml(path), path)
