"""eq. (1)'s width sweep (`coocflow verify --scaling m|m1|both`), its theorem's `scaling` hook: one run folder
per width and init scale under `OUT/runs/` (`WidthSweep.runs`; trained, reused or resumed by
`api.run_scaling` as every sweep's runs are), then every seed measured, every width judged and each
claim's rates fitted per c0 by `coocflow.verify.paper.scaling` (`WidthSweep.judge`), written by
`width_report`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from coocflow.config import Config
from coocflow.errors import CoocflowError
from coocflow.verify.exponents import fit_exponent
from coocflow.verify.paper.premises import DELTA, neurons_meeting_p1
from coocflow.verify.paper.scaling import (
    AXES,
    QUANTITIES,
    WEIGHT_SPACE_MAX_WIDTH,
    fitted_constants,
    judge_rates,
    m1_slope,
    measure,
    seed_table,
)
from coocflow.verify.paper.reading import seed_data
from coocflow.verify.paper.verify import judged_run, width_summary
from coocflow.verify.declare import Theorem
from coocflow.verify.render import Report
from coocflow.verify.scaling import ScalingDesign, ScalingPlan, ScalingRequest, ScalingRun
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


DEFAULT_WIDTHS = (32, 64, 128, 256)
"""The widths of a sweep whose target names no experiment with a design (`Experiment.scaling_widths`)."""


@dataclass(frozen=True)
class WidthPlan(ScalingPlan):
    """A width sweep decided: `values` the widths on `axis` (m, m1 or both), each at every init scale of
    `c0_values` (empty: the base's), each a whole sweep."""

    c0_values: tuple[float, ...] = ()

    @property
    def strata(self) -> tuple[float, ...]:
        return tuple(self.c0_values) or (self.base.init.c0,)


def width_plan(base: Config, axis: str, values: list[int], c0_values: tuple[float, ...] = ()) -> WidthPlan:
    """The sweep of `base` over `values` of `axis` (and the init scales `c0_values`)."""
    return WidthPlan(base, axis, list(values), "width sweep", kind="width sweep", unit="widths",
                     c0_values=tuple(c0_values))


def width_runs(plan: WidthPlan, out: Path) -> list[ScalingRun]:
    """Every run of the sweep: each init scale c0 of the plan's strata at each width, in
    `OUT/runs/AXIS-WIDTH` (`c0-C0-AXIS-WIDTH` with several c0)."""
    base, axis, several = plan.base, plan.axis, len(plan.strata) > 1
    runs = []
    for c0 in plan.strata:
        scaled = base if c0 == base.init.c0 else base.replace({"init.c0": c0})
        for value in plan.values:
            name = f"c0-{c0:g}-{axis}-{value}" if several else f"{axis}-{value}"
            config = scaled.replace(width_overrides(axis, value, scaled))
            runs.append(ScalingRun(value, config, ScalingFolder(out).runs / name,
                                   f"width sweep ({axis}={value}: m={config.model.m}, m1={config.model.m1}, c0={c0:g})",
                                   {"init.c0": c0}))
    return runs


class WidthSweep(ScalingDesign):
    """eq. (1)'s `--scaling m|m1|both`: the widths of the target's experiment (`Experiment.scaling_widths`,
    `scaling_m1` at `scaling_m1_at` for m1, `scaling_c0` as strata for both, `scaling_seeds`), else
    `DEFAULT_WIDTHS` and 4 seeds; the flow at every width (`width_overrides`)."""

    axes = AXES

    def plan(self, theorem: Theorem, request: ScalingRequest) -> WidthPlan:
        preset, axis = request.preset, request.axis
        along_neurons = axis == "m1" and preset is not None and bool(preset.scaling_m1)
        text = request.values
        if text is None:
            text = ",".join(map(str, preset.scaling_m1 if along_neurons else
                                preset.scaling_widths if preset is not None and preset.scaling_widths
                                else DEFAULT_WIDTHS))
        try:
            widths = [int(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise CoocflowError(f"--values {text!r}: expected comma-separated whole numbers, e.g. 32,64,128") from None
        if len(widths) < 2 or min(widths) < 1:
            raise CoocflowError(f"--values {text!r}: need at least two positive widths to fit an exponent")
        seeds = request.seeds if request.seeds is not None else (preset.scaling_seeds if preset is not None else 4)
        overrides = ["train.method=flow"]
        if along_neurons and preset.scaling_m1_at and not request.user_sets("model.m"):
            overrides.append(f"model.m={preset.scaling_m1_at}")
        c0_values = (preset.scaling_c0 if preset is not None and axis == "both" and not request.user_sets("init.c0")
                     else ())
        return width_plan(request.resolve(overrides, seeds), axis, widths, c0_values)

    def runs(self, plan: WidthPlan, out: Path) -> list[ScalingRun]:
        return width_runs(plan, out)

    def judge(self, theorem: Theorem, plan: WidthPlan, runs: list[ScalingRun], out: Path, target: str = "") -> Report:
        from coocflow.verify.paper.width_report import WidthSweepReport, write_scaling  # lazy: it imports this module

        report = width_report(theorem, plan, runs)
        written = write_scaling(out, report, plan.base)
        return WidthSweepReport(report, plan.base, Path(out), tuple(written))


def width_report(theorem: Theorem, plan: WidthPlan, runs: list[ScalingRun]) -> dict:
    """What scaling.json holds of the complete `runs`, judged by `theorem` (eq. (1)'s): every quantity and check per seed, every width's
    premises and checks, and every claim's rates fitted per c0 (and again at the C_T1 of
    `C_T1_SENSITIVITY` under the theory's init)."""
    base, axis, values = plan.base, plan.axis, plan.values
    loaded = [load_run(run.folder) for run in runs]
    predictions_apply = base.init.scheme == "theory"
    rows, widths = _measure(theorem, runs, loaded)
    x = np.asarray(values, float)
    base_rows = [r for r in rows if r["c0"] == base.init.c0] or rows
    quantities = {}
    for name, q in QUANTITIES.items():
        per_width = [[r[name] for r in base_rows if r["value"] == v and r[name] is not None] for v in values]
        medians = [float(np.median(found)) if found else None for found in per_width]
        quantities[name] = {"label": q.label, "medians": medians,
                            "fit": fit_exponent(x, seed_table(base_rows, values, name), name=name, paired=True).to_dict()}
    report = {"axis": axis, "values": list(values), "c0_values": list(plan.strata), "seeds": list(base.seed_list),
              "widths": widths, "rows": rows, "quantities": quantities,
              "rates": _rates(rows, widths, values, plan.strata, predictions_apply),
              "predictions_apply": predictions_apply,
              "m1_slope": m1_slope([r["m"] for r in rows], [r["m1"] for r in rows]), "config": base.to_dict()}
    if base.verify.c_t1 > 0 and base.init.scheme == "theory":
        report["c_t1_judged"] = {}
        for factor in C_T1_SENSITIVITY:
            c_t1 = factor * base.verify.c_t1
            rows_c, widths_c = _measure(theorem, runs, [_with_c_t1(run, c_t1) for run in loaded])
            report["c_t1_judged"][c_t1] = {"widths": widths_c,
                                           "rates": _rates(rows_c, widths_c, values, plan.strata, predictions_apply)}
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


def _measure(theorem: Theorem, planned: list[ScalingRun], loaded: list) -> tuple[list[dict], list[dict]]:
    """Every seed's measured quantities and fitted constants (`rows`) and every width's judged checks
    and premises (`widths`)."""
    rows, widths = [], []
    for planned_run, run in zip(planned, loaded):
        value, c0, config = planned_run.value, planned_run.stratum["init.c0"], planned_run.config
        verification = judged_run(theorem, run)
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
