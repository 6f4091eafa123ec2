"""The plan stage: matrix.yaml + the wheel indexes + the lock -> one concrete wheel per cell.

resolve.py: the plan; indexes.py: each index read once per run, and the picking rules; lock.py:
the lock file; cost.py: what a run will cost, said before it starts.
"""
