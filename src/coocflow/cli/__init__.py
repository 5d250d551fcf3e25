"""The `coocflow` command line.

Startup stays light: JAX, Matplotlib and the model are imported inside the commands that
compute, so `--help`, `keys`, `experiments`, `ls` and `show` answer at once. Help is plain
text (no markup: `[set]` in a help string is shown as written). The commands live in one module
per group (`run`, `inspect`, `verify`, `sweep`, `outputs`, `tools`) and only parse and render: what
they do is in `coocflow.api` and the layers below it.
"""

from __future__ import annotations

import os
import sys

from coocflow import interrupts
from coocflow.cli import run  # noqa: F401  (each module registers its commands; this order is --help's)
from coocflow.cli import inspect  # noqa: F401,E402
from coocflow.cli import verify  # noqa: F401,E402
from coocflow.cli import sweep  # noqa: F401,E402
from coocflow.cli import outputs  # noqa: F401,E402
from coocflow.cli import tools  # noqa: F401,E402
from coocflow.cli.app import app, print_error
from coocflow.errors import CoocflowError, ConfigError, Interrupted

__all__ = ["app", "invoke", "main", "print_error"]


def main() -> None:
    """Entry point: user errors become one red line and exit code 2, never a traceback; Ctrl-C
    or SIGTERM at any moment (compiling included) exits 130 with one line (coocflow.interrupts)."""
    interrupts.install()
    try:
        code = _exit_code(sys.argv[1:])
    except Interrupted as err:
        message = str(err)
        interrupts.set_message(lambda: message)
        interrupts.exit_interrupted()
    except KeyboardInterrupt:
        interrupts.exit_interrupted()
    if code:
        sys.exit(code)
    _leave()


def invoke(args: list[str]) -> int:
    """Run one command in this process as the `coocflow` executable runs it and return its exit
    code: the same output, the same one-line errors and codes (an interrupt: its line and 130),
    without the executable's signal handlers and fast exit (`main`). For scripts, notebooks and
    tests that would otherwise start a process (and import JAX again) per command."""
    try:
        return _exit_code(args)
    except (Interrupted, KeyboardInterrupt) as err:
        print_error(Interrupted(str(err) or "interrupted"))
        return 130


def _exit_code(args: list[str]) -> int:
    """The command's exit code (user errors printed as one line); interrupts propagate."""
    try:
        app(args=_checked_args(args), prog_name="coocflow")
    except Interrupted:
        raise
    except CoocflowError as err:
        print_error(err)
        return getattr(err, "exit_code", 2)
    except SystemExit as done:
        if done.code == 130:
            raise KeyboardInterrupt from None
        if done.code is None or isinstance(done.code, int):
            return done.code or 0
        raise
    return 0


def _leave() -> None:
    """A finished command leaves without the interpreter's teardown (which also restores the
    default Ctrl-C action, so an interrupt landing then would kill the process with a signal
    instead of exiting 130). Ray's own exit hooks stop its local cluster, so it keeps them."""
    if "ray" in sys.modules:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _checked_args(args: list[str]) -> list[str]:
    """Catch `--set key value` (a space for the `=`) before the parser reads `value` as a
    stray argument."""
    for i, arg in enumerate(args[:-1]):
        if arg == "--set" and "=" not in args[i + 1] and i + 2 < len(args) and not args[i + 2].startswith("-"):
            key, value = args[i + 1], args[i + 2]
            raise ConfigError(f"--set {key} {value}: write it as one word, --set {key}={value}")
    return args
