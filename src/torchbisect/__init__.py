"""torchbisect: which PyTorch builds a GPU regression affects, since when, and which fixed it."""

__version__ = "0.1.0"
