"""The columns of a `runs` row, in the order `Store` writes them (store/db.py creates the table).

A module of its own, importing nothing: check.py, which other Pythons load without the package's
dependencies (store/foreign.py), and runs.py, which needs them, read the one spelling here.
"""

RUN_FIELDS = (
    "cell_id",
    "cell_json",
    "status",
    "verdict",
    "cases_json",
    "probe_json",
    "reason",
    "wheel_sha256",
    "probe_version",
    "gpu",
    "driver",
    "backend",
    "started",
    "seconds_install",
    "seconds_probe",
    "log_excerpt",
)
