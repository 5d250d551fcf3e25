"""Integrators of the gradient flow d(theta)/dt = -grad L(theta)."""

from coocflow.flow.discrete import Trajectory, integrate_gd
from coocflow.flow.grid import observation_steps

__all__ = ["Trajectory", "integrate_gd", "observation_steps"]
