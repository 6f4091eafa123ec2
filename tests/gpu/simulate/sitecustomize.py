"""Test harness (tests/gpu only): simulate torch builds in the probe's processes.

Put this folder on PYTHONPATH and set STALE_REPLAY_SIMULATE; once `torch` is imported (in the
probe's forking helper or a child), `torch._lazy_clone` is replaced, and so is the CUDA kernel of
`aten::_lazy_clone` (which compiled code calls), so the whole build behaves as simulated:

  fixed              an eager copy: what a fix that copies at once would do
  refuse:MESSAGE     raise RuntimeError(MESSAGE) while the current stream is capturing, an eager
                     copy otherwise: a fix that refuses under capture, in words nobody predicted
  broken:MESSAGE     raise RuntimeError(MESSAGE) always: a build where the step itself is broken
  crash, hang        under capture: SIGSEGV, or sleep for an hour (an eager copy otherwise)
  poison             under capture: record an out-of-bounds index_select, whose device-side assert
                     on replay leaves the CUDA context unusable (an eager copy otherwise)
"""

import importlib.abc
import importlib.machinery
import os
import signal
import sys
import time

MODE = os.environ.get("STALE_REPLAY_SIMULATE", "")
_KEEP = []


def _patch(torch):
    kind, _, message = MODE.partition(":")

    def fixed(x):
        return x.clone()

    def refuse(x):
        if torch.cuda.is_current_stream_capturing():
            raise RuntimeError(message)
        return x.clone()

    def broken(x):
        raise RuntimeError(message)

    def under_capture(failure):
        def lazy_clone(x):
            if torch.cuda.is_current_stream_capturing():
                failure(x)
            return x.clone()

        return lazy_clone

    def poison(x):
        outside = torch.full((1,), x.numel() + 5, dtype=torch.long, device=x.device)
        x.index_select(0, outside)

    simulated = {
        "fixed": fixed,
        "refuse": refuse,
        "broken": broken,
        "crash": under_capture(lambda x: os.kill(os.getpid(), signal.SIGSEGV)),
        "hang": under_capture(lambda x: time.sleep(3600)),
        "poison": under_capture(poison),
    }[kind]
    torch._lazy_clone = simulated
    _KEEP.append(torch.library.Library("aten", "IMPL"))  # deregistered once collected
    _KEEP[-1].impl("_lazy_clone", simulated, "CUDA")
    sys.stderr.write(f"[simulate] torch._lazy_clone is now {kind!r}\n")


class _AfterTorch(importlib.abc.MetaPathFinder):
    """Finds `torch` as usual and patches it right after its module body has run."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        run_body = spec.loader.exec_module

        def exec_module(module):
            run_body(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


if MODE:
    sys.meta_path.insert(0, _AfterTorch())
