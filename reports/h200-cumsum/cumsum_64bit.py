"""torch.cumsum over the last dimension is silently wrong past 2**32 elements on CUDA

A scan over the innermost dimension of a CUDA tensor with more than 2**32 elements forms its row
offsets in 32 bits: they wrap, so the rows past the wrap are never written (or written over the
first rows) and no error is raised. This script scans a uint8 tensor of 2**25 + 1 rows of 128
ones (2**32 + 128 elements) into an output filled with zeros and checks every row.

Exit status as `git bisect run` reads it: 0 not affected (every row correct), 1 affected (rows
wrong), 125 cannot tell (no CUDA device, too little free GPU memory, the small control scan wrong,
or the scan raised). The last line of output says what was seen. It needs about 9 GB of free GPU
memory and calls no cuBLAS, cuDNN, NCCL or Triton. Standalone: standard library and torch only,
Python 3.8 syntax, so it runs on any torch and as `torchbisect bisect --script`.
"""

import sys

PROBE_VERSION = "1"
PROBE_OUTPUT = "exit_status"
UPSTREAM_ISSUE = "https://github.com/pytorch/pytorch/issues/143486"
FIX_PR = "https://github.com/pytorch/pytorch/pull/143696"
WORKAROUND = ("Scan in pieces of fewer than 2**32 elements: torch.cumsum over blocks of rows "
              "(x.split(n)) into the matching slices of the output.")
CASE_LABELS = {"cumsum_64bit": "cumsum over the last dim, 2**32 + 128 elements"}
NEEDS_GPU = True  # a CUDA tensor of 2**32 + 128 elements: no GPU is 125

ROWS = 2 ** 25 + 1
COLS = 128
CHUNK = 2 ** 22  # rows compared at a time (512 MiB of booleans)
NEEDED = 2 * ROWS * COLS + CHUNK * COLS + 2 ** 28  # input, output, one comparison, slack


def cannot_tell(why):
    print("cannot tell: " + why)
    return 125


def wrong_rows(out, expected):
    """(how many rows differ from `expected`, the first such row or -1)."""
    count, first = 0, -1
    for start in range(0, out.shape[0], CHUNK):
        bad = (out[start:start + CHUNK] != expected).any(dim=1)
        n = int(bad.sum())
        if n and first < 0:
            first = start + int(bad.nonzero()[0][0])
        count += n
    return count, first


def main():
    try:
        import torch
    except Exception as exc:  # a build whose import fails cannot be judged
        return cannot_tell("torch does not import: %s" % exc)
    print("torch %s (git %s)" % (torch.__version__, getattr(torch.version, "git_version", "?")))
    if not torch.cuda.is_available():
        return cannot_tell("no CUDA device")
    free, _total = torch.cuda.mem_get_info()
    if free < NEEDED:
        return cannot_tell("%.1f GB of GPU memory free, %.1f GB needed" % (free / 1e9, NEEDED / 1e9))
    expected = torch.arange(1, COLS + 1, dtype=torch.uint8, device="cuda")
    small = torch.cumsum(torch.ones(8, COLS, dtype=torch.uint8, device="cuda"), dim=-1,
                         dtype=torch.uint8)
    if not bool((small == expected).all()):
        return cannot_tell("the control scan of 8 rows is wrong too: cumsum itself is broken here")
    try:
        x = torch.ones(ROWS, COLS, dtype=torch.uint8, device="cuda")
        out = torch.zeros_like(x)
        torch.cumsum(x, dim=-1, dtype=torch.uint8, out=out)
        torch.cuda.synchronize()
    except Exception as exc:  # refusing is not silently wrong, but it is no measurement either
        return cannot_tell("the scan of %d elements raised %s: %s"
                           % (ROWS * COLS, type(exc).__name__, str(exc).splitlines()[0][:300]))
    del x
    count, first = wrong_rows(out, expected)
    if count:
        print("affected: %d of %d rows wrong after cumsum over the last dim of %d elements "
              "(first wrong row %d, element offset %d)"
              % (count, ROWS, ROWS * COLS, first, first * COLS))
        return 1
    print("not affected: all %d rows correct after cumsum over the last dim of %d elements"
          % (ROWS, ROWS * COLS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
