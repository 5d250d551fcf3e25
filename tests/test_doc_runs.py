"""The documentation runs: every `coocflow` command and every Python block of README.md and the
guides in docs/, executed in the order the page gives them, in a fresh folder per page, with small
configurations where the page's are long (`small`), and the output checked where the page shows it.

Each page starts where `make demo` leaves a user (runs/paper with its report, runs/figure1: the
Makefile's own `coocflow` lines, small) with a copy of examples/ and the files the pages name
without making (`my.toml` from `coocflow keys --toml`, `sweep.csv` for `fit-rate`, runs/a and
runs/b for `compare`, runs/my-sweep for `verify`). A placeholder such as `runs/icl-regression-<time>`
is the folder the page's earlier command wrote. A command passes when it ends without a traceback,
without a one-line user error (`error: ...`) and with exit code 0, or for `verify` and `fit-rate`,
whose exit codes are their verdicts, any verdict's (a shortened run may judge anything).

About 4 minutes on 2 cores, so `make test` (which must stay under 10 minutes) leaves these to
`.ci/run`, which runs them after it (`-m doc_runs`); `tests/test_doc_commands.py`, in `make test`,
parses every one of these commands and resolves its configuration in seconds."""

from __future__ import annotations

import ast
import contextlib
import re
import shlex
import shutil
import textwrap
import time
import types
from pathlib import Path

import pytest

from conftest import REPO, coocflow_here

pytestmark = pytest.mark.doc_runs

PAGES = ("README.md", "docs/quickstart.md", "docs/guide.md", "docs/cli.md", "docs/configuration.md",
         "docs/systems.md", "docs/theorems.md", "docs/findings.md")
"""The pages whose commands a user types: the others show none (index.md: `make`) or are about
the code (development.md)."""

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
SMALL_DISCRETE = ["train.steps=40", "observe.points=8", "observe.chunks=1"]
SMALL_FLOW = ["train.t_end=0.5", "observe.points=8", "observe.chunks=1", "train.steps=50"]
"""What `small` adds to a command that trains: 40 optimizer steps, or the flow to t = 0.5, 8
observations in one chunk (the pages' runs take 5 s to minutes; what these tests check is that
each command works as the page writes it, which a short run shows as well as a long one)."""
FULL_SIZE = ("examples/saxe.toml", "examples/icl_theorem.toml")
"""Targets run as the page gives them: theorems.md shows their verdicts, which the test checks,
and they take seconds."""
SHORTER = {
    ("power",): ["--trials", "5"],  # 200 simulated sweeps per cell: 96 s
    ("bench",): ["--case", "gd"],  # every case, even with --quick: 220 s
}


def steps(page: str):
    """(kind, text) of every block in page order: ("sh", one command line) for each `coocflow` line
    of a shell block (continuations joined), ("python", code) for a Python block and ("output", block)
    for an untagged block of lines that start with a verdict (what a command printed)."""
    for tag, body in FENCE.findall((REPO / page).read_text()):
        if tag == "python":
            yield "python", body
        elif tag in ("sh", "bash", ""):
            lines = body.replace("\\\n", " ").splitlines()
            if tag == "" and lines and re.match(r"(pass|fail|incon)", lines[0]):
                yield "output", body
                continue
            for line in lines:
                stripped = line.strip()
                if re.match(r"(\S*/)?coocflow\s", stripped):
                    yield "sh", stripped


def words_of(line: str) -> tuple[list[str], str | None, str]:
    """A command line's arguments after `coocflow`, the file its stdout is redirected to, and its
    comment; `[x]` (an optional argument shown) taken as given."""
    code, _, comment = line.partition(" #")
    words = shlex.split(code.replace("[", "").replace("]", ""))
    target = None
    if ">" in words:
        target = words[words.index(">") + 1]
        words = words[: words.index(">")]
    return words[1:], target, comment.strip()


def placeholders(args: list[str], folder: Path) -> list[str]:
    """`runs/x-<time>` (and `<flow>`): the newest folder of that pattern the page's commands wrote;
    `<gd>`: the oldest (the page runs GD first)."""
    out = []
    for arg in args:
        found = re.search(r"<(\w+)>", arg)
        if found:
            matches = sorted(folder.glob(arg.replace(found.group(0), "*")), key=lambda p: p.stat().st_mtime_ns)
            assert matches, f"{arg}: no folder of that pattern was written before this command"
            arg = str((matches[0] if found.group(1) == "gd" else matches[-1]).relative_to(folder))
        out.append(arg)
    return out


def small(args: list[str]) -> list[str]:
    """The command with a small configuration: `--set` keys that shorten what it trains (the flow
    or the optimizer's steps, `SMALL_FLOW` / `SMALL_DISCRETE`), a width sweep over two widths and
    one seed, a sweep spec shortened in the page's copy of examples/ (`_shorten_spec`), `SHORTER`."""
    from coocflow.api import resolve_config

    command = args[0] if args else ""
    for prefix, extra in SHORTER.items():
        if tuple(args[: len(prefix)]) == prefix:
            return args + extra
    if command not in ("run", "verify") or "--resume" in args or "--check-reproduce" in args:
        return args
    target = args[1]
    if target in FULL_SIZE or (target.startswith("runs/") and command == "verify"):
        return args
    sets = [args[k + 1] for k, word in enumerate(args) if word == "--set"]
    method = dict(s.split("=", 1) for s in sets).get("train.method")
    if method is None:
        method = resolve_config(target, []).train.method
    extra = [w for s in (SMALL_FLOW if method == "flow" else SMALL_DISCRETE) for w in ("--set", s)]
    if "--scaling" in args:
        extra += ["--values", "64,128", "--seeds", "1"] if "--values" not in args else []
    return args + extra


def _shorten_spec(path: Path) -> None:
    """A sweep spec of the page's copy of examples/, shortened: 2 seeds, 40 steps, 8 observations."""
    text = path.read_text()
    text = re.sub(r"^seeds = \d+", "seeds = 2", text, flags=re.M)
    text = re.sub(r'^"train.steps" = \d+', '"train.steps" = 40', text, flags=re.M)
    text = re.sub(r'^"observe.points" = \d+', '"observe.points" = 8', text, flags=re.M)
    path.write_text(text)


class SmallAPI(types.ModuleType):
    """`coocflow` for a page's Python block: the package itself, except that `run` trains with
    `small`'s configuration added to the block's overrides."""

    def __init__(self):
        import coocflow

        super().__init__("coocflow")
        self.__dict__.update({k: v for k, v in vars(coocflow).items() if not k.startswith("__") and k != "run"})
        self._run = coocflow.run

    def run(self, target="paper", *, overrides=None, **options):
        given = [f"{k}={v}" for k, v in overrides.items()] if isinstance(overrides, dict) else list(overrides or [])
        args = small(["run", str(target), *[w for s in given for w in ("--set", s)]])
        sets = [args[k + 1] for k, word in enumerate(args) if word == "--set"]
        return self._run(target, overrides=sets, **options)


def run_python(code: str, namespace: dict) -> None:
    """A page's Python block, executed in the page's namespace with `coocflow` as `SmallAPI`;
    an excerpt of an example (a block with `...` bodies) is compared with that example instead."""
    tree = ast.parse(code)
    if any(isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and node.value.value is Ellipsis
           for node in ast.walk(tree)):
        return check_excerpt(code)
    code = re.sub(r"^import coocflow$", "", code, flags=re.M)
    exec(compile(code, "<page>", "exec"), namespace)


EXCERPTS = {"ICLSettings": "examples/icl_regression.py", "THEOREM": "examples/saxe.py"}


def check_excerpt(code: str) -> None:
    """Every line of an excerpt, less its comments and `...`, is a line of the example it shows."""
    source = next((REPO / path).read_text() for name, path in EXCERPTS.items() if name in code)
    lines = {line.split("  #")[0].strip() for line in source.splitlines()}
    imports = {k for node in ast.walk(ast.parse(code)) if isinstance(node, (ast.Import, ast.ImportFrom))
               for k in range(node.lineno, node.end_lineno + 1)}  # test_doc_commands.py checks the names
    for number, line in enumerate(code.splitlines(), 1):
        line = line.split("  #")[0].strip()
        if number in imports:
            continue
        if line and line != "..." and not line.endswith(": ..."):
            assert line in lines, f"the page shows {line!r}, which its example does not have"


def check_shown_output(block: str, printed: str) -> None:
    """Each verdict line the page shows (`pass   S1 ...`) starts a line the command printed."""
    for line in block.splitlines():
        verdict_and_claim = re.match(r"(pass|fail|inconclusive|vacuous)\s+(\S+)", line)
        if verdict_and_claim:
            verdict, claim = verdict_and_claim.groups()
            assert re.search(rf"^{verdict}\s+{re.escape(claim)}\s", printed, re.M), (
                f"the page shows {verdict} {claim}; the command printed:\n{printed}")


def check_comment(comment: str, printed: str) -> None:
    """A comment that states counts (`6 claims, 6 pass`) is what the command's summary says."""
    counts = re.search(r"(\d+) claims, (\d+) pass", comment)
    if counts:
        claims, passed = counts.groups()
        assert re.search(rf"\b{passed} pass\b", printed) and re.search(rf"\bof {claims}\b|\b{claims} claims\b", printed), (
            f"the page says {counts.group(0)}; the command printed:\n{printed}")


@pytest.fixture(scope="session")
def after_make_demo(tmp_path_factory) -> Path:
    """What `make demo` leaves (its `coocflow` lines from the Makefile, small), with the files the
    pages use without making them."""
    folder = tmp_path_factory.mktemp("demo")
    recipe = (REPO / "Makefile").read_text().split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    for line in re.findall(r"\$\(BIN\)/coocflow (.*)", recipe):
        done = coocflow_here(*small(shlex.split(line)), cwd=folder)
        assert done.returncode == 0, done.stdout + done.stderr
    assert (folder / "runs" / "paper" / "report.html").is_file() and (folder / "runs" / "figure1").is_dir()
    shutil.copytree(folder / "runs" / "paper", folder / "runs" / "a")
    shutil.copytree(folder / "runs" / "figure1", folder / "runs" / "b")
    shutil.copytree(folder / "runs" / "paper", folder / "runs" / "long")
    (folder / "my.toml").write_text(coocflow_here("keys", "--toml").stdout)
    rows = [f"{m},{seed},{3.0 / m * (1 + 0.01 * seed)}" for m in (64, 128, 256, 512) for seed in range(3)]
    (folder / "sweep.csv").write_text("m,seed,value\n" + "\n".join(rows) + "\n")
    spec = folder / "saxe_sweep.toml"
    spec.write_text('name = "my-sweep"\nbase = "examples/saxe.toml"\nseeds = 2\n[grid]\n"settings.top" = [1.0, 2.0]\n')
    shutil.copytree(REPO / "examples", folder / "examples")
    done = coocflow_here("sweep", spec, "--out", "runs/my-sweep", "--workers", "1", cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    return folder


@pytest.mark.parametrize("page", PAGES)
def test_the_page_runs_as_written(page, after_make_demo, tmp_path, monkeypatch):
    folder = tmp_path / "work"
    shutil.copytree(after_make_demo, folder)
    for spec in (folder / "examples").glob("*sweep*.toml"):
        _shorten_spec(spec)
    monkeypatch.setenv("COLUMNS", "200")
    namespace: dict = {"coocflow": SmallAPI()}
    printed, ran = "", 0
    for kind, text in steps(page):
        if kind == "output":
            check_shown_output(text, printed)
            printed = ""
            continue
        if kind == "python":
            began = time.perf_counter()
            with contextlib.chdir(folder):
                run_python(textwrap.dedent(text), namespace)
            print(f"{time.perf_counter() - began:6.1f} s  a Python block")
            continue
        args, redirect, comment = words_of(text)
        with contextlib.chdir(folder):
            args = small(placeholders(args, folder))
        began = time.perf_counter()
        done = coocflow_here(*args, cwd=folder)
        print(f"{time.perf_counter() - began:6.1f} s  coocflow {' '.join(args)}")
        printed += done.stdout + done.stderr
        said = f"`coocflow {' '.join(args)}`:\n{done.stdout + done.stderr}"
        judged = args[0] in ("verify", "fit-rate")  # their exit codes are verdicts (cli.md)
        assert "error:" not in done.stderr and done.returncode in ((0, 1, 2, 3, 4) if judged else (0,)), said
        if redirect:
            (folder / redirect).write_text(done.stdout)
        if not any(word in args for word in ("--trials", "--values")):
            check_comment(comment, done.stdout + done.stderr)
        ran += 1
    assert ran or page == "docs/guide.md"
