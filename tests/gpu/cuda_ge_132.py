"""`bisect --script` predicate for the H200 demo: bad when torch was built against CUDA >= 13.2."""

import sys

import torch

built = tuple(int(p) for p in (torch.version.cuda or "0.0").split(".")[:2])
print(f"torch {torch.__version__} built with CUDA {torch.version.cuda}")
sys.exit(1 if built >= (13, 2) else 0)
