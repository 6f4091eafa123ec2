"""`finishing`: a run ends with its backend's `finish` (docker: prune uv's cache volume), also when
it stops with one of torchbisect's own errors (a fix search that stops at its ends installed
builds too), never after Ctrl-C, and never in place of the error the run stopped with."""

from __future__ import annotations

import pytest
from helpers import ScriptedBackend

from torchbisect.backends.base import finishing
from torchbisect.errors import ConfigError


class _Finishing(ScriptedBackend):
    def __init__(self) -> None:
        super().__init__()
        self.said: list[str] = []

    def finish(self, *, say) -> None:
        say("finished")


def test_a_run_that_ends_finishes_after_its_work():
    backend = _Finishing()
    with finishing(backend, backend.said.append):
        backend.said.append("work")
    assert backend.said == ["work", "finished"]


def test_a_run_stopped_by_a_torchbisect_error_finishes_and_keeps_the_error():
    backend = _Finishing()
    with (
        pytest.raises(ConfigError, match="the newest nightly is still bad"),
        finishing(backend, backend.said.append),
    ):
        raise ConfigError("the newest nightly is still bad")
    assert backend.said == ["finished"]


@pytest.mark.parametrize("stop", [KeyboardInterrupt, RuntimeError])
def test_ctrl_c_or_a_bug_does_not_finish(stop):
    backend = _Finishing()
    with pytest.raises(stop), finishing(backend, backend.said.append):
        raise stop()
    assert backend.said == []
