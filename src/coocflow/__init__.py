"""coocflow: the gradient-flow dynamics of Yang et al. (NeurIPS 2024), runnable and checkable.

Importing coocflow enables JAX's float64 (the default dtype of every run; float32 stays
selectable per run with `dtype = "float32"`).
"""

import jax

jax.config.update("jax_enable_x64", True)

__version__ = "0.1.0"
