"""Running a width sweep (`coocflow verify --scaling AXIS`): one run folder per width and init
scale under `OUT/runs/`, reused when complete with the same training configuration, resumed when
interrupted; each is measured and judged by `coocflow.theorems.paper.scaling`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from coocflow.api import ensure_run
from coocflow.config import Config
from coocflow.theorems.exponents import fit_exponent
from coocflow.theorems.paper.premises import DELTA, neurons_meeting_p1
from coocflow.theorems.paper.scaling import (
    QUANTITIES,
    WEIGHT_SPACE_MAX_WIDTH,
    fitted_constants,
    judge_rates,
    m1_slope,
    measure,
    seed_table,
)
from coocflow.theorems.paper.reading import seed_data
from coocflow.theorems.paper.theorem import verify_run
from coocflow.theorems.paper.verify import width_summary
from coocflow.storage import load_run
from coocflow.storage.folders import ScalingFolder

T_END_PER_LOSS_SCALE = 50.0
"""... and runs to t = 50 m^(k-1) / c1^2: F8's 1/loss ~ kappa U0 t (kappa ~ 0.07) reaches m^k by about
14 m^(k-1) / c1^2, so T* = first loss <= m^-k is inside the run with room to spare."""


def width_overrides(axis: str, value: int, base: Config) -> dict:
    """`m` or `m1` moves one width alone. `both` moves m and, under the theory init, gives m1 the
    most neurons (a power of two, at most the base m1) that keep P1 at that m
    (`premises.neurons_meeting_p1`); otherwise it keeps the base ratio m1 / m. Under the theory init
    every axis runs the flow in the run's own time scale: from `Config.flow_start` = 0.01 / U0, well
    before T1 ~ C_T1 / U0, to past T* (`T_END_PER_LOSS_SCALE`). A Gram-space base runs in weight space
    up to `WEIGHT_SPACE_MAX_WIDTH` unless it resolves the neurons."""
    if axis == "m":
        widths = {"model.m": value}
    elif axis == "m1":
        widths = {"model.m1": value}
    elif base.init.scheme == "theory":
        widths = {"model.m": value, "model.m1": neurons_meeting_p1(value, DELTA, base.model.m1)}
    else:
        ratio = base.model.m1 / base.model.m
        widths = {"model.m": value, "model.m1": max(1, int(round(ratio * value)))}
    m = widths.get("model.m", base.model.m)
    if base.init.scheme == "theory" and base.is_flow:
        widths["train.t_end"] = T_END_PER_LOSS_SCALE * m ** (base.verify.loss_exponent - 1) / base.init.c1 ** 2
    if base.model.space == "gram" and m <= WEIGHT_SPACE_MAX_WIDTH and not getattr(base.model, "neurons", False):
        widths["model.space"] = "weights"
    return widths


@dataclass(frozen=True)
class WidthRun:
    """One run of a width sweep: its width `value` on the axis, its init scale, its configuration and
    the run folder it trains into (`OUT/runs/NAME`)."""

    value: int
    c0: float
    config: Config
    folder: Path

    def job(self) -> dict:
        """As a job for the sweep executors (`sweep.execute.run_width_job`): plain JSON."""
        return {"id": self.folder.name, "config": self.config.to_dict(), "folder": str(self.folder)}


def width_runs(base: Config, axis: str, values: list[int], out: Path, c0_values: tuple[float, ...] = ()
               ) -> list[WidthRun]:
    """Every run of the sweep: each init scale c0 of `c0_values` (default the base's) at each width."""
    c0_values = tuple(c0_values) or (base.init.c0,)
    runs = []
    for c0 in c0_values:
        scaled = base if c0 == base.init.c0 else base.replace({"init.c0": c0})
        for value in values:
            name = f"{axis}-{value}" if len(c0_values) == 1 else f"c0-{c0:g}-{axis}-{value}"
            runs.append(WidthRun(value, c0, scaled.replace(width_overrides(axis, value, scaled)),
                                 ScalingFolder(out).runs / name))
    return runs


def width_scaling(base: Config, axis: str, values: list[int], out: Path,
                  progress: Callable[[str], None] | None = None, c0_values: tuple[float, ...] = (),
                  train: Callable[[list[WidthRun]], None] | None = None, accept_changed_code: bool = False) -> dict:
    """Run `base` at each width (and each init scale c0 of `c0_values`, default the base's) into
    `out/runs/`, measure every quantity and check per seed, and fit every claim's rates per c0.

    `train`, when given, trains every run first (e.g. as Ray tasks, `sweep.execute.run_on_ray` with
    `run_width_job`); each is then reused here as any complete run is. Without it each width trains
    here, in turn. `accept_changed_code` reuses runs whose System's code changed since (`api.ensure_run`)."""
    c0_values = tuple(c0_values) or (base.init.c0,)
    planned = width_runs(base, axis, values, out, c0_values)
    if train is not None:
        train(planned)
    loaded = []
    for planned_run in planned:
        config = planned_run.config
        if progress:
            progress(f"{axis}={planned_run.value}: m={config.model.m}, m1={config.model.m1}, c0={planned_run.c0:g}, "
                     f"{config.model.space} space, {len(config.seed_list)} seeds")
        loaded.append(load_run(ensure_run(config, planned_run.folder, accept_changed_code).folder))
    predictions_apply = base.init.scheme == "theory"
    rows, widths = _measure(planned, loaded)
    x = np.asarray(values, float)
    base_rows = [r for r in rows if r["c0"] == base.init.c0] or rows
    quantities = {}
    for name, q in QUANTITIES.items():
        per_width = [[r[name] for r in base_rows if r["value"] == v and r[name] is not None] for v in values]
        medians = [float(np.median(found)) if found else None for found in per_width]
        quantities[name] = {"label": q.label, "medians": medians,
                            "fit": fit_exponent(x, seed_table(base_rows, values, name), name=name, paired=True).to_dict()}
    report = {"axis": axis, "values": list(values), "c0_values": list(c0_values), "seeds": list(base.seed_list),
              "widths": widths, "rows": rows, "quantities": quantities,
              "rates": _rates(rows, widths, values, c0_values, predictions_apply),
              "predictions_apply": predictions_apply,
              "m1_slope": m1_slope([r["m"] for r in rows], [r["m1"] for r in rows]), "config": base.to_dict()}
    if base.verify.c_t1 > 0 and base.init.scheme == "theory":
        report["c_t1_judged"] = {}
        for factor in C_T1_SENSITIVITY:
            c_t1 = factor * base.verify.c_t1
            rows_c, widths_c = _measure(planned, [_with_c_t1(run, c_t1) for run in loaded])
            report["c_t1_judged"][c_t1] = {"widths": widths_c,
                                           "rates": _rates(rows_c, widths_c, values, c0_values, predictions_apply)}
    return report


C_T1_SENSITIVITY = (0.5, 2.0)
"""C_T1 stands for the theorem's "large enough" constant, so a sweep that declares
it is also judged at half and at twice its value, on the same runs (`verify.c_t1` is not part of
what training reads). Checks that read the saved state at T1 have it only at the declared C_T1
(state_snapshots.npz) and are not applicable at the others."""


def _with_c_t1(run, c_t1: float):
    """`run` as verify reads it with `verify.c_t1` set to `c_t1` (the folder is not touched)."""
    config = {**run.config, "verify": {**run.config.get("verify", {}), "c_t1": c_t1}}
    return dataclasses.replace(run, config=config)


def _measure(planned: list[WidthRun], loaded: list) -> tuple[list[dict], list[dict]]:
    """Every seed's measured quantities and fitted constants (`rows`) and every width's judged checks
    and premises (`widths`)."""
    rows, widths = [], []
    for planned_run, run in zip(planned, loaded):
        value, c0, config = planned_run.value, planned_run.c0, planned_run.config
        verification = verify_run(run)
        widths.append({"value": value, "c0": c0, "space": config.model.space, "folder": str(planned_run.folder),
                       **width_summary(verification, config.model.m, config.model.m1)})
        for (seed, data), results in zip(seed_data(run), verification.per_seed):
            rows.append({"value": value, "c0": c0, "m": config.model.m, "m1": config.model.m1, "seed": seed,
                         **measure(data), **fitted_constants(results)})
    return rows, widths


def _rates(rows: list[dict], widths: list[dict], values: list[int], c0_values: tuple[float, ...],
           predictions_apply: bool) -> list[dict]:
    rates = []
    for c0 in c0_values:
        of_c0 = [r for r in rows if r["c0"] == c0]
        rates += judge_rates(of_c0, [w for w in widths if w["c0"] == c0], values, predictions_apply, c0)
    return rates
