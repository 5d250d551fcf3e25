"""`coocflow` and `python -m coocflow`: the command line, with Ctrl-C handled from the first
instruction (even while the command line's modules are still importing)."""

import os
import sys


def main() -> None:
    try:
        from coocflow.cli import main as cli_main  # lazy: defers Rich
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.stderr.flush()
        os._exit(130)
    cli_main()


if __name__ == "__main__":
    main()
