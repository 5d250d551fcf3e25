"""eq. (1)'s theorem: phase analysis and the machine check of the paper's claims (`coocflow verify`).

The phase boundaries are imported on first use (PEP 562), so the NumPy-only parts (the rate test
that `coocflow fit-rate` and `coocflow power` run) load without JAX: 3.8 s of imports saved a call."""

import importlib

__all__ = ["common_token_catch_up", "first_time_all_correct", "phase2_start", "phase_boundaries"]


def __getattr__(name: str):
    if name in __all__:
        return getattr(importlib.import_module("coocflow.verify.paper.boundaries"), name)
    raise AttributeError(f"module 'coocflow.verify.paper' has no attribute {name!r}")
