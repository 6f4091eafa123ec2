"""Wheel indexes: what PyTorch's (or any PEP 503/691) index lists, read into `Wheel`s.

fetch.py: fetching pages with retries; pages.py: what a page says (HTML, JSON or a folder of
wheels); tags.py: which wheels install on a Python and platform (pure rules, no network);
choose.py: the file pip installs of a version; cuda.py: which CUDA a build says it is;
metadata.py: a wheel's METADATA, from the served file its page vouches for or the wheel itself.
"""
