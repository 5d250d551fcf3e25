"""`make demo` ends with Figure 1 as printed beside the paper as stated, and says which is which:
its Figure 1 command, run as the Makefile writes it, draws the I2/I3 rise."""

import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from coocflow.cli import app
from coocflow.plots import SeriesView
from coocflow.plots.figures import phase1_title
from coocflow.storage import load_run

MAKEFILE = Path(__file__).resolve().parents[1] / "Makefile"


def _demo_recipe() -> list[str]:
    text = MAKEFILE.read_text()
    recipe = re.search(r"^demo:.*\n((?:\t.*\n)+)", text, re.MULTILINE).group(1)
    return [line.strip() for line in recipe.splitlines()]


def test_make_demo_runs_the_paper_then_figure1_and_names_them():
    lines = _demo_recipe()
    runs = [line for line in lines if "coocflow run " in line]
    assert "run paper --out runs/paper" in runs[0] and "run paper-phenomena" in runs[-1]
    said = " ".join(line for line in lines if line.startswith("@echo"))
    assert "runs/figure1/figure1.png: Figure 1 as printed" in said and "runs/paper/figure1.png" in said


def test_the_demos_figure1_shows_the_rise_of_phase1(tmp_path):
    command = next(line for line in _demo_recipe() if "run paper-phenomena" in line)
    args = shlex.split(command.split("coocflow ", 1)[1])
    args[args.index("--out") + 1] = str(tmp_path / "figure1")
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    run = load_run(tmp_path / "figure1")
    title = phase1_title(SeriesView.from_metrics(run.metrics))
    assert "I2 rises" in title and "I3" in title and "then both fall" in title, title
    assert (tmp_path / "figure1" / "figure1.png").stat().st_size > 10000
