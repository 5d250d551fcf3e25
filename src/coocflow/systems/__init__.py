"""Tasks as `AbstractSystem`s: what coocflow trains besides eq. (1) (docs/systems.md).

`AbstractSystem` and `named_arrays` are read on first use, so that `coocflow.systems.traits`
(what read-only commands need to know of a System) imports without JAX."""

__all__ = ["AbstractSystem", "named_arrays"]


def __getattr__(name: str):
    if name in __all__:
        from coocflow.systems import base  # lazy: defers JAX, 1-3.6 s

        return getattr(base, name)
    raise AttributeError(f"module 'coocflow.systems' has no attribute {name!r}")
