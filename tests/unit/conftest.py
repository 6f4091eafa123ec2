"""What every unit test may use beyond tests/conftest.py: the OSV schema's `validator`."""

from __future__ import annotations

from helpers.osv import validator  # noqa: F401  (a fixture: pytest finds it by its name here)
