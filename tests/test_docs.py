"""The reference pages under docs/ are what the code generates (they cannot drift)."""

from coocflow.config import all_keys
from coocflow.docs import HELP, config_reference, metrics_reference

from conftest import REPO


def test_every_config_key_is_documented():
    assert set(HELP) == set(all_keys())


def test_committed_reference_pages_are_current():
    assert (REPO / "docs" / "config.md").read_text() == config_reference(), "run `coocflow docs`"
    assert (REPO / "docs" / "metrics.md").read_text() == metrics_reference(), "run `coocflow docs`"
