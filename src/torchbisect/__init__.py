"""torchbisect: which PyTorch builds read stale lazy clones under CUDA Graphs, and since when."""

__version__ = "0.1.0"
