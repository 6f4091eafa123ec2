"""Bisection over nightly builds: the pure search, the commit lookup, and the driver that probes.

`search` knows nothing of torch; `commits` reads git and the GitHub API; `driver` wires the index,
the backends and the store into the search.
"""
