"""Integrators of the gradient flow d(theta)/dt = -grad L(theta) for any system
(`flow.system`): Diffrax for the ODE itself, Optax for the discrete optimizers (gradient descent is
its explicit-Euler solution)."""

from coocflow.flow.grid import observation_steps, observation_times
from coocflow.flow.ode import vector_field
from coocflow.flow.system import (
    EnsembleTraining,
    event_record,
    integrate,
    integrate_discrete,
    integrate_flow,
    stack_seeds,
)
from coocflow.flow.trajectory import in_threads

__all__ = ["EnsembleTraining", "event_record", "in_threads", "integrate", "integrate_discrete", "integrate_flow",
           "observation_steps", "observation_times", "stack_seeds", "vector_field"]
