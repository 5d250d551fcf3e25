"""Export a run's metrics as TensorBoard scalars (`coocflow export --tensorboard`).

One event-file directory per seed (`seed_<s>`), one scalar tag per metrics column grouped as
`<group>/<name>`, the step being the observation index and the wall time the flow time t, so
TensorBoard's "relative" and "wall" axes show the flow's time. Needs the optional tensorboardX.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from coocflow.errors import ConfigError
from coocflow.storage import load_run


def export_tensorboard(run_folder: Path, out: Path | None = None) -> Path:
    try:
        from tensorboardX import SummaryWriter  # lazy: optional extra, imported where used
    except ImportError:
        raise ConfigError("--tensorboard: tensorboardX is not installed; pip install 'coocflow[tensorboard]'") from None
    from coocflow.observables import OBSERVABLES  # lazy: defers JAX, 1-3.6 s

    run = load_run(Path(run_folder))
    out = Path(out) if out else Path(run_folder) / "tensorboard"
    metrics = run.metrics
    seeds = np.unique(metrics["seed"]) if "seed" in metrics else np.array([run.manifest["seed"]])
    for seed in seeds:
        rows = metrics["seed"] == seed if "seed" in metrics else np.ones(len(metrics["t"]), dtype=bool)
        order = np.argsort(metrics["t"][rows], kind="stable")
        t = metrics["t"][rows][order]
        with SummaryWriter(logdir=str(out / f"seed_{int(seed)}"), flush_secs=1) as writer:
            for name, obs in OBSERVABLES.items():
                if name not in metrics:
                    continue
                values = np.asarray(metrics[name][rows][order], dtype=float)
                for step, (time, value) in enumerate(zip(t, values)):
                    if np.isfinite(value):
                        writer.add_scalar(f"{obs.group}/{name}", value, global_step=step, walltime=float(time))
    return out
