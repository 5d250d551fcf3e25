"""Run folders: JSON + Parquet + npz, written atomically, readable without coocflow."""

from coocflow.storage.atomic import atomic_write_bytes, atomic_write_json, atomic_write_text
from coocflow.storage.run_folder import (
    FORMAT_VERSION,
    STATE_KEYS,
    LoadedRun,
    load_run,
    read_metrics,
    read_state,
    write_arrays,
    write_metrics,
)

__all__ = [
    "FORMAT_VERSION", "STATE_KEYS", "LoadedRun", "atomic_write_bytes", "atomic_write_json",
    "atomic_write_text", "load_run", "read_metrics", "read_state", "write_arrays", "write_metrics",
]
