"""Build-time include of the top-level `probes/` folder as `torchbisect/_probes` in the wheel.

The probes stay where a reader of the repository finds them (they are standalone scripts that run
in containers without this package); an installed torchbisect needs them beside its modules, so
the wheel's build step copies them there.  Everything else is declared in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PROBES = Path(__file__).resolve().parent / "probes"


class BuildWithProbes(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads the checkout's probes/ itself
            return
        target = Path(self.build_lib) / "torchbisect" / "_probes"
        shutil.copytree(PROBES, target, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildWithProbes})
