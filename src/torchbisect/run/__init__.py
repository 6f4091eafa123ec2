"""The run stage: from the plan's cells to stored runs.

matrix_run.py `run_matrix(options, handler)`, the one entry point: plan, pick, backend, select,
             probe, finish; what it did as a `MatrixRun`
options.py   `MatrixOptions`: what a run is asked to do, built once from the flags by the command
selection.py which cells run: --cells/--skip, shards, --overlay, and what is stored already
schedule.py  which cell on which GPU, and when: install lookahead, running the cells
execute.py   one cell into one CellRun: the one place failures become statuses
no_gpu.py    which cells a machine without a GPU probes, said in one sentence
kind.py      a runner and the kind it claims to be (runners.yaml), and its shard's attendance
progress.py  what a matrix run shows its user while it runs
"""
