"""One run path for every System, eq. (1) included: config -> system -> integrate -> run folder ->
figures. `train` gives a `TrainedRun` of the class the System names (`AbstractSystem.run_type`: the
generic `TrainedRun`, or eq. (1)'s `Eq1TrainedRun`), and the folder functions write, draw and read
any of them.

The package is `runs` (not `run`): `coocflow.run` is the Python API's function, which a
subpackage of that name would shadow once imported."""

from coocflow.runs.base import TrainedRun, config_hash, config_hashes, long_columns, record_hash, run_type, train
from coocflow.runs.folder import (
    begin_run_folder,
    draw_figures,
    read_states,
    train_and_write,
    write_run,
    write_run_files,
)

__all__ = ["TrainedRun", "begin_run_folder", "config_hash", "config_hashes", "draw_figures", "long_columns",
           "read_states", "record_hash", "run_type", "train", "train_and_write", "write_run", "write_run_files"]
