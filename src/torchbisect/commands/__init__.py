"""The commands of `torchbisect`, one module each (`commands/matrix.py` is `torchbisect matrix`).

Each has `configure(parser)` and `run(args) -> int` and declares what it needs as `NEEDS`; the
CLI's machinery in cli/ (the parser, the flags they share, the gates, the catcher) imports only
the chosen one.
"""
