"""Every printed hint is right: a message naming an optional extra keeps its brackets
when the command line prints it (Rich markup escaped), and `sweep --ray` without Ray is refused
before anything is created."""

import sys
from pathlib import Path

import pytest
import tomllib
from rich.console import Console

from coocflow.cli import print_error
from coocflow.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
DEVELOPER_EXTRAS = {"test", "docs"}
"""Extras for working on coocflow (the test suite, the MkDocs site), which no command asks for."""
EXTRAS = sorted(set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
                - DEVELOPER_EXTRAS)


def _missing_extra_message(extra: str, monkeypatch) -> str:
    """The error a command gives when `extra`'s package is not installed."""
    if extra == "ray":
        from coocflow.sweep.execute import require_ray

        monkeypatch.setitem(sys.modules, "ray", None)
        call = require_ray
    elif extra == "tensorboard":
        from coocflow.report.tensorboard import export_tensorboard

        monkeypatch.setitem(sys.modules, "tensorboardX", None)
        call = lambda: export_tensorboard(Path("nowhere"))  # noqa: E731
    else:
        pytest.fail(f"extra {extra!r} has no message test: add one here")
    with pytest.raises(ConfigError) as raised:
        call()
    return str(raised.value)


@pytest.mark.parametrize("extra", EXTRAS)
def test_a_message_naming_an_extra_prints_it_whole(extra, monkeypatch):
    message = _missing_extra_message(extra, monkeypatch)
    assert f"coocflow[{extra}]" in message
    screen = Console(record=True, width=200)
    print_error(ConfigError(message), to=screen)
    assert f"pip install 'coocflow[{extra}]'" in screen.export_text()


def test_sweep_ray_without_ray_creates_nothing(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from coocflow.cli import app

    monkeypatch.setitem(sys.modules, "ray", None)
    out = tmp_path / "sweep"
    done = CliRunner().invoke(app, ["sweep", str(ROOT / "examples" / "sweep_m_L.toml"), "--ray", "local",
                                    "--out", str(out)])
    assert isinstance(done.exception, ConfigError) and "coocflow[ray]" in str(done.exception)
    assert not out.exists()
