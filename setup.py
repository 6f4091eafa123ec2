"""Build-time include of the top-level `probes/` folder as `torchbisect/_probes` in the wheel,
and of the top-level `matrix.yaml` as `torchbisect/_data/matrix.yaml` (the default matrix).

The probes and the matrix stay where a reader of the repository finds them (the probes are
standalone scripts that run in containers without this package; the matrix is the checkout's
own); an installed torchbisect needs them beside its modules, so the wheel's build step copies
them there.  Everything else is declared in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
PROBES = ROOT / "probes"
MATRIX = ROOT / "matrix.yaml"


class BuildWithProbes(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads the checkout's probes/ and matrix
            return
        target = Path(self.build_lib) / "torchbisect" / "_probes"
        shutil.copytree(PROBES, target, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        data = Path(self.build_lib) / "torchbisect" / "_data"
        data.mkdir(parents=True, exist_ok=True)
        shutil.copy2(MATRIX, data / "matrix.yaml")


setup(cmdclass={"build_py": BuildWithProbes})
