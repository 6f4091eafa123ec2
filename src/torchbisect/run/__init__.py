"""The run stage: from the plan's cells to stored runs.

execute.py  one cell into one CellRun: the one place failures become statuses
schedule.py what is stored already, shards, GPUs, install lookahead, running the cells
stage.py    which cells a machine without a GPU probes, and probing the picked ones
kind.py     a runner and the kind it claims to be (runners.yaml), and its shard's attendance
progress.py what a matrix run shows its user while it runs
"""
