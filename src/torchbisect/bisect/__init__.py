"""Bisection over nightly builds (or releases): the pure search, the commit lookup, and the driver
that probes.  What a bisection concludes is `torchbisect.outcome`, on the ground floor.

`search` knows nothing of torch; `candidates` names each build with the matrix's cell id;
`verdicts` states the rule; `commits` reads git and the GitHub API; `driver` wires the index, the
backends (through `execute`, a --script included) and the store into the search; `walk` finds a
missing --good from --bad; `result` makes the `BisectResult` (how exact, the candidates);
`forget` takes back stored verdicts; `telling` says why a bisection cannot go on; `run` is
`torchbisect bisect` end to end.
"""
