"""torchbisect: which PyTorch builds give stale data from lazy clones under CUDA Graphs, and since when."""

__version__ = "0.1.0"
