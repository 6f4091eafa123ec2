"""Runs a `git bisect run` command or script as a probe, where the build is installed.

Two uses, one reading of an exit status.  `torchbisect bisect --script CMD` puts CMD in the
environment (`TORCHBISECT_SCRIPT`) and this script runs it through `/bin/sh -c`; its one case is
`script`.  An exit-status probe (a plain `git bisect run` script in the probes folder, named in
matrix.yaml or with `--probe`) is run as `script.py --probe FILE --case NAME`: the build's
interpreter runs FILE, and the one case is NAME (the probe's file name).  Either way the exit
status decides as `git bisect run` does: 0 not affected, 125 cannot tell (`inconclusive`), 1-127
affected, above 127 (or a signal) an error that stops a bisection; the last non-empty line of
output is the case's detail.  With `--timeout S` (torchbisect passes the cell's) a command still
running shortly before S seconds (a tenth of S earlier, 1 to 10 s, at most S/2) is killed with
what it started, and its verdict is `timeout`: the build was probed and did not answer in time.
With `--requires-api torch.x.y` (the probe's REQUIRES_API) a build without that API is
`not_applicable` and FILE is not run.  This script writes the document
every probe writes, so torchbisect installs, runs, times out, stores and judges such a script
exactly as it does its own probe, on every backend (the venv on this host, or a container).

A FILE this interpreter cannot open or compile, or one that holds no statement (empty, a `#!`
line, comments, a docstring), is no verdict: this script says why on its last line and exits 128
without a document, which torchbisect stores as a failed run.  It returns when the command
exits: a daemon the command left holding its output is not waited for (torchbisect ends it with
the rest of the cell's processes).

The command runs with the build's interpreter first on PATH and these set: TORCHBISECT_PYTHON
(that interpreter), TORCHBISECT_TORCH_VERSION (its torch's version) and TORCHBISECT_DATE
(YYYY-MM-DD of a nightly, empty for a release).  Its output goes on to this script's own (the
cell's log) as it comes.

Standalone by contract (see probes/README.md): stdlib + torch only, Python 3.8 syntax, no import of
torchbisect. torch's version is read from the torch/version.py this interpreter would import,
without importing torch (an import of a CUDA build takes seconds, paid on every build a bisection
judges); only a version.py that does not spell its values out is asked in a child interpreter.
Either way a torch that cannot even be imported still lets the command decide.

Usage: TORCHBISECT_SCRIPT=CMD python script.py [--cases script] [--trials N] [--timeout S]
                                             --json PATH
       python script.py --probe FILE [--case NAME] [--requires-api DOTTED] [--timeout S]
                        --json PATH
"""

import argparse
import ast
import importlib.util
import json
import os
import re
import select
import signal
import subprocess
import sys
import time

BEGAN = time.monotonic()  # when this process started: torchbisect's timeout counts from about here

PROBE_VERSION = "1"
CASE = "script"
DETAIL_CHARS = 2000  # a case's detail, as the document's contract bounds it
TAIL_BYTES = 8192  # of the command's output kept to find its last line
DRAIN_READS = 16  # reads of what is left in the pipe once the command exited (a pipe's worth)
CANNOT_RUN = 128  # no document: torchbisect reads it as an error of the run, never a verdict
_ASK_TORCH = "import torch; print(torch.__version__); print(torch.version.git_version)"


def torch_versions(env):
    """(version, git_version) of the torch this interpreter imports; "" for what it cannot tell.

    Read from its torch/version.py where that file assigns both as string literals (every
    release and nightly does), else asked of a child interpreter that imports torch."""
    found = _version_file_values()
    if found is not None:
        return found
    try:
        out = subprocess.run([sys.executable, "-c", _ASK_TORCH], env=env, timeout=300,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True)
    except (OSError, subprocess.TimeoutExpired):
        return "", ""
    lines = out.stdout.strip().splitlines() if out.returncode == 0 else []
    return (lines[-2].strip(), lines[-1].strip()) if len(lines) >= 2 else ("", "")


def _version_file_values():
    """(__version__, git_version) as torch/version.py assigns them, or None where it cannot be
    read that way (no torch, no such file, values computed rather than written out)."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
    try:
        with open(path, "rb") as fh:
            tree = ast.parse(fh.read(), path)
    except (OSError, SyntaxError, ValueError):
        return None
    values = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) else [])
        value = getattr(node, "value", None)
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            for target in targets:
                if isinstance(target, ast.Name):
                    values[target.id] = value.value.strip()
    if "__version__" not in values or "git_version" not in values:
        return None
    return values["__version__"], values["git_version"]


def nightly_date(version):
    match = re.search(r"\.dev(\d{4})(\d{2})(\d{2})", version)
    return "-".join(match.groups()) if match else ""


def command_env(version):
    """This process's environment with the build's interpreter first on PATH."""
    env = dict(os.environ)
    bindir = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join([bindir, env.get("PATH", os.defpath)])
    env["TORCHBISECT_PYTHON"] = sys.executable
    env["TORCHBISECT_TORCH_VERSION"] = version
    env["TORCHBISECT_DATE"] = nightly_date(version)
    if os.path.isfile(os.path.join(os.path.dirname(bindir), "pyvenv.cfg")):
        env["VIRTUAL_ENV"] = os.path.dirname(bindir)
    return env


def verdict_of(status, said=""):
    """The `git bisect run` reading of an exit status, as a probe verdict and its detail: the
    last line the command printed, and its status."""
    if status == 0:
        verdict, how = "not_affected", "exit 0"
    elif status == 125:
        verdict, how = "inconclusive", "exit 125"
    elif 1 <= status <= 127:
        verdict, how = "affected", "exit %d" % status
    elif status < 0:
        verdict, how = "error", "killed by signal %d" % -status
    else:
        verdict, how = "error", "exit %d (above 127: stops the bisection)" % status
    return verdict, ("%s (%s)" % (said, how) if said else how)[-DETAIL_CHARS:]


def last_line(data):
    """The last non-empty line of some output bytes, as text."""
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines()]
    return next((line for line in reversed(lines) if line), "")


def run_and_tail(argv, env, deadline=None):
    """Run argv, passing its output on as it comes; (exit status, its last non-empty line), the
    status None when it was still running at `deadline` (time.monotonic()) and was killed then.

    Returns when argv exits, with what it wrote before it exited: a process it left behind that
    still holds the pipe (a daemon) is not waited for. The command runs in a process group of its
    own, which is killed once the command has ended or at the deadline, so that what it started
    ends with it."""
    child = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             preexec_fn=os.setpgrp)
    out = getattr(sys.stdout, "buffer", sys.stdout)
    fd = child.stdout.fileno()
    tail = [b""]

    def take(chunk):
        out.write(chunk)
        out.flush()
        tail[0] = (tail[0] + chunk)[-TAIL_BYTES:]

    status = None
    while status is None:
        status = child.poll()  # before reading: all it wrote before it exited is in the pipe
        if status is None and deadline is not None and time.monotonic() >= deadline:
            stop(child)
            break
        if select.select([fd], [], [], 0.2)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:  # everyone closed the pipe: only its exit is left to wait for
                status = wait_until(child, deadline)
                break
            take(chunk)
    os.set_blocking(fd, False)  # what is in the pipe now, not what a daemon writes later
    for _ in range(DRAIN_READS):
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        take(chunk)
    child.stdout.close()
    try:  # what it left running (a daemon that dropped torchbisect's mark too) ends with it
        os.killpg(child.pid, signal.SIGKILL)
    except OSError:
        pass  # nothing is left in its group
    return status, last_line(tail[0])


def wait_until(child, deadline):
    """The child's exit status, or None once it was killed at `deadline`."""
    try:
        return child.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        stop(child)
        return None


def stop(child):
    """Kill the command and every process of its group, and reap it."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except OSError:
        child.kill()
    child.wait()


def deadline_of(timeout, started):
    """When the command is stopped: the cell's timeout less a margin (a tenth, 1 to 10 s, at most
    half the timeout) in which this script writes its document before torchbisect's own stop,
    which writes none."""
    if timeout is None or timeout <= 0:
        return None
    return started + timeout - min(10.0, max(1.0, timeout / 10.0), timeout / 2.0)


def cannot_run(path):
    """Why the build's interpreter cannot run the file `path` as a probe ("" when it can): it
    cannot be opened, does not compile with this interpreter, or holds no statement (nothing,
    a `#!` line, comments or a docstring alone exit 0, which would read as not affected)."""
    name = os.path.basename(path)
    try:
        with open(path, "rb") as fh:
            source = fh.read()
    except OSError as exc:
        return "the probe %s cannot be opened (%s)" % (name, exc.strerror or exc)
    try:
        tree = ast.parse(source, path)
        compile(tree, path, "exec")
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        return "the probe %s does not compile with Python %d.%d%s: %s" % (
            name, sys.version_info[0], sys.version_info[1],
            " (line %d)" % line if line else "", getattr(exc, "msg", exc))
    if not [node for node in tree.body if not _is_docstring(node)]:
        return ("the probe %s holds no statement (only comments, a #! line or a docstring), so "
                "it tests nothing: write the check it should run" % name)
    return ""


def _is_docstring(node):
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str))


def not_started(path, status, said):
    """The interpreter's own refusal to open `path` (exit 2, "can't open file"): the file went
    away after `cannot_run` read it.  Never a verdict."""
    if status == 2 and "can't open file" in said and os.path.basename(path) in said:
        return "the probe %s could not be opened when it was started (%s)" % (
            os.path.basename(path), said)
    return ""


_HAS_API = """
import importlib, sys
parts = sys.argv[1].split(".")
try:
    found = importlib.import_module(parts[0])
except Exception:
    sys.exit(3)
for i in range(1, len(parts)):
    try:
        found = getattr(found, parts[i])
    except AttributeError:
        try:
            found = importlib.import_module(".".join(parts[:i + 1]))
        except Exception:
            sys.exit(1)
"""


def has_api(name, env):
    """False when this build lacks the dotted name (its module imports, the name is absent);
    True when it has it, or when that cannot be told (the script decides then)."""
    try:
        status = subprocess.call([sys.executable, "-c", _HAS_API, name], env=env, timeout=300,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return True
    return status != 1


def document(case, verdict, detail, status, seconds, version, git_version):
    result = {"verdict": verdict, "detail": detail, "seconds": round(seconds, 3)}
    if status is not None:  # None: not run
        result["exit_status"] = status
    return {"schema": 1, "probe": case, "probe_version": PROBE_VERSION, "verdict": verdict,
            "cases": {case: result},
            "env": {"torch_version": version, "git_version": git_version}}


def refuse(why):
    """A probe that cannot run: said on the last line, no document, status CANNOT_RUN."""
    sys.stdout.flush()
    sys.stderr.write("script.py: %s\n" % why)
    return CANNOT_RUN


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probe", metavar="FILE",
                        help="an exit-status probe to run with this interpreter")
    parser.add_argument("--case", help="the one case's name (default: FILE's name, or script)")
    parser.add_argument("--requires-api", metavar="DOTTED",
                        help="not_applicable, without running FILE, when this build lacks it")
    parser.add_argument("--cases", help="accepted for the contract; one case")
    parser.add_argument("--trials", help="accepted for the contract; the command decides alone")
    parser.add_argument("--timeout", type=float, metavar="SECONDS",
                        help="the cell's timeout: a command still running near it is stopped "
                             "and its verdict is timeout")
    parser.add_argument("--json", metavar="PATH", required=True)
    args = parser.parse_args(argv)
    command = os.environ.get("TORCHBISECT_SCRIPT", "")
    if args.probe is None and not command.strip():
        return refuse("TORCHBISECT_SCRIPT is empty and no --probe: nothing to run")
    case = args.case or (os.path.splitext(os.path.basename(args.probe))[0] if args.probe
                         else CASE)
    version, git_version = torch_versions(dict(os.environ))
    env = command_env(version)
    started = time.monotonic()
    deadline = deadline_of(args.timeout, BEGAN)  # the version asked of a child counts too
    if args.requires_api and not has_api(args.requires_api, env):
        verdict, status = "not_applicable", None
        detail = "%s does not exist in this build: not run" % args.requires_api
        print(detail)
    else:
        why = cannot_run(args.probe) if args.probe else ""
        if why:
            return refuse(why)
        argv = [sys.executable, args.probe] if args.probe else ["/bin/sh", "-c", command]
        status, said = run_and_tail(argv, env, deadline)
        why = not_started(args.probe, status, said) if args.probe and status is not None else ""
        if why:
            return refuse(why)
        if status is None:
            how = "still running after %.0f s, stopped (timeout %g s)" % (
                time.monotonic() - started, args.timeout)
            verdict, detail = "timeout", ("%s (%s)" % (said, how) if said else how)[-DETAIL_CHARS:]
        else:
            verdict, detail = verdict_of(status, said)
    doc = document(case, verdict, detail, status, time.monotonic() - started, version,
                   git_version)
    with open(args.json, "w") as fh:
        json.dump(doc, fh, indent=2)
    return {"not_affected": 0, "affected": 1}.get(verdict, 125)


if __name__ == "__main__":
    sys.exit(main())
