"""Tasks as `AbstractSystem`s: what coocflow trains besides eq. (1) (docs/systems.md)."""

from coocflow.systems.base import AbstractSystem, named_arrays

__all__ = ["AbstractSystem", "named_arrays"]
