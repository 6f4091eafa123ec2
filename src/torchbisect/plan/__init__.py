"""The plan stage: matrix.yaml + the wheel indexes + the lock -> one concrete wheel per cell.

planning.py: the plan a command uses, its lock kept up to date; resolve.py: the plan from its
parts; indexes.py: each index read once per run, and the picking rules; lock.py: the lock file;
cost.py: what a run will cost, said before it starts.
"""
