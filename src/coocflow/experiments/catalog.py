"""Every study by name, and the check each runs on its configuration before its folder exists.

The registry imports the modules that define the studies (they import the shared helpers of
`experiments.studies`, never this module), so the studies and their helpers form no cycle."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from coocflow.config import Config
from coocflow.experiments.deep import check_deep_config, deep
from coocflow.experiments.markov import check_markov_config, markov
from coocflow.experiments.noise import noise
from coocflow.experiments.random_tokens import relaxed_data, unseen_tokens
from coocflow.experiments.studies import Progress, StudyResult, generalization, init_scale, optimizers

STUDIES: dict[str, Callable[[Config, Path, Progress | None], StudyResult]] = {
    "generalization": generalization,
    "unseen-tokens": unseen_tokens,
    "relaxed-data": relaxed_data,
    "deep": deep,
    "optimizers": optimizers,
    "noise": noise,
    "init-scale": init_scale,
    "markov": markov,
}
CONFIG_CHECKS: dict[str, Callable[[Config], None]] = {"deep": check_deep_config, "markov": check_markov_config}
"""The studies that refuse some configurations (a method they cannot train) before they start."""


def check_study_config(study: str, config: Config) -> None:
    """Refuse a config the study cannot train before its folder is created."""
    if study in CONFIG_CHECKS:
        CONFIG_CHECKS[study](config)
