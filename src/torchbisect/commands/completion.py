"""`torchbisect completion SHELL`: the shell code that completes torchbisect's commands and flags.

argcomplete's: the shell asks `torchbisect` itself (cli.main answers before anything runs), so
completions follow the installed version.  `eval "$(torchbisect completion bash)"` in ~/.bashrc.
"""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "shell",
        choices=("bash", "zsh", "fish", "tcsh", "powershell"),
        help="the shell to complete in",
    )


def run(args: argparse.Namespace) -> int:
    import argcomplete

    print(argcomplete.shellcode(["torchbisect"], shell=args.shell), end="")
    return 0
