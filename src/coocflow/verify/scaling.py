"""`coocflow verify --scaling AXIS` for every System: which runs a sweep makes and how they are judged.

A theorem says it with its `Theorem.scaling` hook, a `ScalingDesign` (eq. (1)'s width sweep over m, m1
or both, with strata in c0: `verify.paper.width_sweep.WidthSweep`); along any other axis, and for a
theorem that declares none, `KeySweep`: one run per value of any config key, judged by the judge of
every declared theorem. Whatever the design, the runs take one path: planned here, trained by
`api.run_scaling` (reused when complete, resumed when interrupted, on Ray where asked), then judged here
from their folders into a `render.Report`. A design never trains.
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from coocflow.config import Config, current_key, is_known_key, suggest_key
from coocflow.errors import CoocflowError
from coocflow.storage.folders import TheoremSweepFolder
from coocflow.verify.declare import Rate, Theorem
from coocflow.verify.render import Report
from coocflow.verify.folders import verify_folders


@dataclass(frozen=True)
class ScalingRequest:
    """What `verify TARGET --scaling AXIS` was asked, before any run is planned."""

    target: str
    axis: str
    values: str | None
    """`--values` as typed (comma-separated), None for the design's own."""
    seeds: int | None
    """`--seeds N`, None for the design's own (else the target's)."""
    resolve: Callable[[list[str], int | None], Config]
    """The target's configuration with these overrides applied before the user's `--set` and with N seeds
    (None: the target's)."""
    user_overrides: tuple[str, ...] = ()
    """The user's `--set KEY=VALUE`s (a design leaves a key the user set alone)."""
    preset: Any = None
    """The experiment the target names (`experiments.Experiment`: its scaling design's defaults), or None."""

    def user_sets(self, key: str) -> bool:
        return any(override.startswith(f"{key}=") for override in self.user_overrides)


@dataclass(frozen=True)
class ScalingPlan:
    """A sweep decided: its base configuration, the axis as its folder and titles name it, the values."""

    base: Config
    axis: str
    values: list
    title: str
    """The progress bar's text while nothing runs yet ("width sweep", "sweep of settings.top")."""
    kind: str = "sweep"
    """What the sweep is called in messages ("training the {kind}'s runs")."""
    unit: str = "runs"
    """What one of its runs is called ("widths", "runs")."""


@dataclass(frozen=True)
class ScalingRun:
    """One run of a sweep: its value on the axis, its configuration, the folder it trains into, and the
    progress bar's text while it trains or is read."""

    value: float
    config: Config
    folder: Path
    description: str
    stratum: dict[str, Any] = field(default_factory=dict)
    """The keys other than the axis this run's stratum fixes (eq. (1): `{"init.c0": 0.02}`); empty: one."""

    def job(self, accept_changed_code: bool = False) -> dict:
        """As a job for the executors (`sweep.execute.run_folder_job`): plain JSON."""
        return {"id": self.folder.name, "config": self.config.to_dict(), "folder": str(self.folder),
                "accept_changed_code": accept_changed_code}


class ScalingDesign(abc.ABC):
    """How `verify --scaling` sweeps a theorem's System along the axes it names and judges the runs."""

    axes: tuple[str, ...] = ()
    """The `--scaling` axes this design sweeps; along any other, `KeySweep`."""

    @abc.abstractmethod
    def plan(self, theorem: Theorem, request: ScalingRequest) -> ScalingPlan:
        """The sweep `request` asks for, its values and seeds defaulted; one line (`CoocflowError`) for
        values it cannot sweep."""

    @abc.abstractmethod
    def runs(self, plan: ScalingPlan, out: Path) -> list[ScalingRun]:
        """Every run of the sweep, each with its folder under `out`."""

    @abc.abstractmethod
    def judge(self, theorem: Theorem, plan: ScalingPlan, runs: list[ScalingRun], out: Path, target: str = "") -> Report:
        """`theorem` judged on the complete runs, its files written into `out`."""


class KeySweep(ScalingDesign):
    """One run per value of any config key (`settings.X`, `data.n`, `optimizer.lr`, ...), each with the
    base's seeds (paired across values), every claim judged over all of them and each `Rate` along the
    key (`verify.folders.verify_folders`). The values default to the design a `Rate` along the key
    declares."""

    def plan(self, theorem: Theorem, request: ScalingRequest) -> ScalingPlan:
        key = current_key(request.axis)
        if not is_known_key(key) or key in ("name", "seed", "seeds", "system"):
            close = suggest_key(request.axis)
            raise CoocflowError(f"--scaling {request.axis}: not a config key to sweep"
                                + (f"; did you mean {close}?" if close else
                                   "; see `coocflow keys` and `coocflow keys --system`"))
        designs = [claim.design for claim in theorem.claims
                   if isinstance(claim, Rate) and claim.axis == key and claim.design]
        if request.values is None:
            if not designs:
                raise CoocflowError(f"--values: the theorem declares no design along {key}; give the values, "
                                    "e.g. --values 1,2,4,8")
            points = list(designs[0])
        else:
            try:
                points = [float(v) if any(ch in v for ch in ".eE") else int(v)
                          for v in request.values.split(",") if v.strip()]
            except ValueError:
                raise CoocflowError(f"--values {request.values!r}: expected comma-separated numbers, "
                                    "e.g. 1,2,4,8") from None
        if len(points) < 2 or len(set(points)) < len(points):
            raise CoocflowError(f"--values {request.values!r}: need at least two distinct values of {key}")
        rates = [claim.id for claim in theorem.claims if isinstance(claim, Rate) and key in claim.exponents()]
        unfit = [value for value in points if not (math.isfinite(value) and value > 0)]
        if rates and unfit:
            raise CoocflowError(f"--values: {unfit[0]:g} is not a positive number, and the rate {rates[0]} along {key} is "
                                "fit on the values' logarithms; give positive values")
        for value in points:  # each run's config checked at the door (the System's own settings too), before any folder
            request.resolve([f"{key}={value!r}"], request.seeds)
        return ScalingPlan(request.resolve([], request.seeds), key, points, f"sweep of {key}")

    def runs(self, plan: ScalingPlan, out: Path) -> list[ScalingRun]:
        key = plan.axis
        return [ScalingRun(value, plan.base.replace({key: value, "name": f"{plan.base.name}-{key}={value:g}"}),
                           TheoremSweepFolder(out).run_folder(key, value), f"sweep of {key} ({key}={value:g})")
                for value in plan.values]

    def judge(self, theorem: Theorem, plan: ScalingPlan, runs: list[ScalingRun], out: Path, target: str = "") -> Report:
        return verify_folders([run.folder for run in runs], plan.axis, [float(run.value) for run in runs], target,
                              out, theorem)


def design_for(theorem: Theorem, axis: str) -> ScalingDesign:
    """The theorem's own design where it sweeps `axis` (`Theorem.scaling`), else `KeySweep`."""
    own = theorem.scaling
    return own if own is not None and axis in own.axes else KeySweep()
