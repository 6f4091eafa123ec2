"""The store stage: every cell run and every bisection, in one SQLite file.

db.py: the `Store` (SQLite); runs.py: a run as a row and as JSON; columns.py: the columns of a
row; check.py: the read-only check a file passes before anything writes to it.
"""
