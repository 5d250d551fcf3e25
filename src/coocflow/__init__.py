"""coocflow: the gradient-flow dynamics of Yang et al. (NeurIPS 2024), runnable and checkable.

Importing coocflow enables JAX's float64 (the default dtype of every run; float32 stays
selectable per run with `dtype = "float32"`).
"""

import jax

jax.config.update("jax_enable_x64", True)

__version__ = "0.1.0"


def run(*args, **kwargs):
    """Train and write a run folder, then load it: see `coocflow.notebook.run`."""
    from coocflow.notebook import run as _run

    return _run(*args, **kwargs)


def load(folder):
    """Read a run folder into a `Run`: see `coocflow.notebook.load`."""
    from coocflow.notebook import load as _load

    return _load(folder)


def verify(target):
    """Every check of `coocflow verify` on a run: see `coocflow.notebook.verify`."""
    from coocflow.notebook import verify as _verify

    return _verify(target)
