"""Integrators of the gradient flow d(theta)/dt = -grad L(theta): Diffrax for the ODE itself,
Optax for the discrete optimizers (gradient descent is its explicit-Euler solution)."""

from coocflow.flow.discrete import integrate_discrete
from coocflow.flow.grid import observation_steps, observation_times
from coocflow.flow.ode import integrate_flow, vector_field
from coocflow.flow.trajectory import Trajectory

__all__ = ["Trajectory", "integrate_discrete", "integrate_flow", "observation_steps",
           "observation_times", "vector_field"]
