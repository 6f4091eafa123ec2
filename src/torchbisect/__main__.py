"""`python -m torchbisect` and the `torchbisect` command (pyproject.toml's script): `cli.main`, the
one catcher, with a Ctrl-C that lands while it is still being imported said as the interruption
it is (exit 130), never as a traceback."""

import sys


def main() -> int:
    try:  # nothing of torchbisect's is imported before this line (__init__ imports nothing)
        from torchbisect.cli import main as catcher
    except KeyboardInterrupt:
        from torchbisect.exits import Exit

        print("torchbisect: interrupted", file=sys.stderr)
        return Exit.INTERRUPTED
    return catcher()


if __name__ == "__main__":
    raise SystemExit(main())
