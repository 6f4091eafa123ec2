"""torch._lazy_clone copies can hand stale data to kernels under CUDA Graph replay and race with side streams

Materializing a copy-on-write tensor made by torch._lazy_clone runs a synchronous cudaMemcpy on the
legacy default stream. During CUDA Graph capture the copy runs once and is not recorded in the
graph, so every replay reads the data as of capture time; outside graphs the copy does not wait for
work on PyTorch's non-blocking streams. A fixed build either copies in stream order or refuses at
capture with a clear error.

Does this torch build give stale data when a copy-on-write tensor is materialized?
`torch._lazy_clone` defers its copy until the clone is written or asked for a mutable pointer. That
deferred copy is a plain synchronous `cudaMemcpy` on the legacy stream: under CUDA Graph capture it
runs once and is never recorded (every replay reads the capture-time copy), and without a graph it
does not wait for work queued on PyTorch's non-blocking streams. This script tells, for the torch it
runs under, whether either happens.

Standalone by contract (see probes/README.md): stdlib + torch only, Python 3.8 syntax, no import of
torchbisect, and nothing from torch is imported at load time, so it loads on any torch from 1.13 on.
Every case runs in a process of its own so a crash, a hang or a poisoned CUDA context loses no other
case. Importing torch costs seconds, so one helper process (`--_fork`) imports it once, before any
CUDA initialisation, and forks a child per case; should that helper fail, the cases it did not
finish run as fresh interpreters (`--_child CASE`), each importing torch itself.

Cases (each compares what the GPU produced with what it should have produced):
  capture_data_ptr         capture `y = _lazy_clone(x); y.data_ptr(); out = y * 2`, replay after
                           copying fresh data into x
  capture_write            the same, materialized by an in-place write (`y.mul_(2)`)
  side_stream              no graph: x produced on a side stream behind `torch.cuda._sleep`, then
                           lazy-cloned and materialized on that stream; --trials trials, the stale
                           fraction reported
  compile_reduce_overhead  lazy clones inside and into `torch.compile(mode="reduce-overhead")`
                           functions, fresh inputs on every call; the variants tried are reported
  raw_pointer_triton       a lazy clone made during capture handed to a Triton kernel (which takes
                           its data_ptr()), as tensor-parallel code hands pointers to custom kernels
  control_clone            negative control: capture_data_ptr with a regular clone(): must be
                           correct
  control_stale            positive control: a copy made before capture; must be seen as stale

Case verdicts: affected, not_affected, refused (the step raised during capture and the same step
outside capture succeeded: a fix that refuses, whatever its message says), not_applicable (API
absent), inconclusive (a control misbehaved), error, crashed, timeout, skipped (no CUDA device).
A case is `affected` only when stale values were seen AND both controls behaved; the controls
always run and never count toward `affected` themselves.

Roll-up of the run verdict, first rule that applies:
  1. skipped         every case was skipped (no CUDA device)
  2. inconclusive    a control misbehaved: wrong result, or no result (error, crash, timeout, ...)
  3. affected        any case saw stale data
  4. error, crashed, timeout   the first of these, in that order, that any case got: a run that
                     could not finish a case never rolls up to a safe verdict
  5. refused         any case refused at capture (a fix that raises instead of copying)
  6. not_affected    any case was measured correct
  7. not_applicable  nothing could be measured (e.g. no torch._lazy_clone in this build)

Exit status follows `git bisect run`: 0 not_affected or refused, 1 affected, 125 anything else;
128 (which aborts `git bisect run`) for a bad command line.

Usage: python stale_replay.py [--cases a,b] [--trials N] [--timeout S] [--jobs N] [--json PATH]
The JSON document goes to stdout (or PATH); progress lines go to stderr.
"""

import argparse
import json
import os
import platform
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

PROBE_VERSION = "3"  # bump when a change alters what a verdict means

# What the report says of this regression (read by torchbisect with `ast`, never imported).
# The bug had no upstream issue of record when this was written: matrix.yaml's
# `references.upstream` names one when it has.
OSV_ID = "x_TORCHBISECT-lazy-clone-cuda-graph"
REQUIRES_API = "torch._lazy_clone"
WORKAROUND = ("Use x.clone() instead of torch._lazy_clone(x): a real copy is captured into the "
              "graph and ordered on the current stream. Materializing the lazy clone before "
              "capture (one write, after the stream that produced x is synchronized) avoids the "
              "race too, but the graph then replays that one copy.")
WORKAROUND_BENCH = "workaround"  # reports/bench/workaround.json: the clone's cost per replay
CASE_LABELS = {
    "capture_data_ptr": "capture + data_ptr()",
    "capture_write": "capture + write",
    "side_stream": "side-stream race",
    "compile_reduce_overhead": "compile (reduce-overhead)",
    "raw_pointer_triton": "raw pointer \u2192 Triton",
    "control_clone": "control: clone()",
    "control_stale": "control: stale copy",
}
CASE_NOTES = {
    "control_clone": "negative control, must be correct",
    "control_stale": "positive control, must be detected",
}
# How the workaround's cost is quoted: each row of reports/bench/workaround.json gives the time (ms)
# the clone node adds to a graph replay at its size.
WORKAROUND_COST = {"key": "graph_clone_node_ms", "adds_to": "a graph replay"}
# How torchbisect judges these cases: the capture case decides a bisection; the side-stream race
# shows now and then, so it is judged over --trials (bad when stale on at least 1 of them); the
# compile case's `variants` are counted per variant on the page.
BISECT_CASE = "capture_data_ptr"
TRIAL_CASES = {"side_stream": 1}
VARIANTS = {"key": "variants", "affected": "stale", "unit": "calls"}
NEEDS_GPU = True  # CUDA Graphs and streams: without a GPU every case is skipped

SCHEMA = 1
PROBE = "stale_replay"

AFFECTED = "affected"
NOT_AFFECTED = "not_affected"
REFUSED = "refused"
NOT_APPLICABLE = "not_applicable"
INCONCLUSIVE = "inconclusive"
ERROR = "error"
CRASHED = "crashed"
TIMEOUT = "timeout"
SKIPPED = "skipped"
VERDICTS = (AFFECTED, NOT_AFFECTED, REFUSED, NOT_APPLICABLE, INCONCLUSIVE, ERROR, CRASHED,
            TIMEOUT, SKIPPED)
FAILURES = (ERROR, CRASHED, TIMEOUT)  # in roll-up precedence order

COMPILE_CASE = "compile_reduce_overhead"
CASES = ("capture_data_ptr", "capture_write", "side_stream", "compile_reduce_overhead",
         "raw_pointer_triton", "control_clone", "control_stale")
# What each control must show for the comparison to be trusted.
# Literals (not the names above), so torchbisect reads them from this file without running it.
CONTROLS = {"control_clone": "not_affected", "control_stale": "affected"}

# Started first when cases run at once: the longest case bounds the run's wall time.
SLOW_FIRST = (COMPILE_CASE, "raw_pointer_triton")

DEFAULT_TRIALS = 20
MAX_DEFAULT_JOBS = 8  # children at once unless --jobs says: the compile variants and the rest
DEFAULT_TIMEOUT = 120.0  # x 7 cases stays inside torchbisect's default 900 s per cell
REPLAYS = 5
COMPILE_CALLS = 6
NUMEL = 1 << 20
SLEEP_CYCLES = 40000000  # ~20-40 ms of torch.cuda._sleep, far longer than issuing the copy takes
DETAIL_LIMIT = 2000
NO_CUDA = "no CUDA device: torch.cuda.is_available() is False"
USAGE_EXIT = 128  # git bisect run aborts on >= 128 instead of marking the commit bad

# A fixed build may refuse to materialize during capture, e.g. "Cannot write to this tensor (or take
# its data_ptr()) during graph capture: it shares memory with a lazy copy". Nobody knows what the
# real fix will say, so a refusal is recognised by behaviour (see `refusal_outcome`); whether the
# message names both the capture and the lazy copy is recorded beside it as supporting detail.
REFUSAL_CAPTURE = re.compile(r"captur", re.IGNORECASE)
REFUSAL_COPY = re.compile(r"lazy[ _-]?(copy|clone)|copy[- ]on[- ]write|\bCOW\b|materiali[sz]",
                          re.IGNORECASE)


# --- verdict logic: pure functions, imported by the tests without torch ---------------------------

def exit_code(verdict):
    """`git bisect run` convention: 0 good, 1 bad, 125 cannot tell."""
    if verdict == AFFECTED:
        return 1
    return 0 if verdict in (NOT_AFFECTED, REFUSED) else 125


def compared(stale, trials, unit="replays"):
    """A case result from a comparison: stale on `stale` of `trials` runs."""
    if stale == 0:
        detail = f"correct on {trials}/{trials} {unit}"
    elif stale < trials:
        detail = f"stale on {stale}/{trials} {unit} (flaky: a race)"
    else:
        detail = f"stale on {stale}/{trials} {unit}"
    return {"verdict": AFFECTED if stale else NOT_AFFECTED, "detail": detail,
            "stale_trials": stale, "trials": trials}


def control_behaved(name, case):
    """True when control `name` ran and showed what it must (a missing control never behaved).

    The positive control must be stale on every replay: its copy is stale by construction.
    """
    if case is None or case.get("verdict") != CONTROLS[name]:
        return False
    return CONTROLS[name] != AFFECTED or case.get("stale_trials") == case.get("trials")


def settle(cases):
    """Apply the controls to raw case results: the one place a case becomes `inconclusive`."""
    behaved = all(control_behaved(name, cases.get(name)) for name in CONTROLS)
    settled = {}
    for name, case in cases.items():
        case = dict(case)
        measured = case.get("verdict") in (AFFECTED, NOT_AFFECTED)
        if name in CONTROLS and measured and not control_behaved(name, case):
            case["verdict"] = INCONCLUSIVE
            expected, seen = CONTROLS[name], case.get("detail", "")
            case["detail"] = f"control misbehaved (expected {expected}): {seen}"
        elif name not in CONTROLS and measured and not behaved:
            case["verdict"] = INCONCLUSIVE
            case["detail"] = "controls misbehaved, so this comparison is not trusted: " + (
                case.get("detail") or "")
        elif case.get("verdict") == REFUSED and not control_behaved(
                "control_clone", cases.get("control_clone")):
            case["verdict"] = INCONCLUSIVE  # capture itself is broken here: no sign of a refusal
            case["detail"] = "capturing a regular clone failed too, so this is no refusal: " + (
                case.get("detail") or "")
        settled[name] = case
    return settled


def roll_up(cases):
    """The run's verdict from settled case results; the precedence is in the module docstring."""
    verdicts = [c["verdict"] for c in cases.values()]
    if all(v == SKIPPED for v in verdicts):
        return SKIPPED
    if INCONCLUSIVE in verdicts or not all(
            control_behaved(name, cases.get(name)) for name in CONTROLS):
        return INCONCLUSIVE
    measured = [c["verdict"] for name, c in cases.items() if name not in CONTROLS]
    for verdict in (AFFECTED,) + FAILURES + (REFUSED, NOT_AFFECTED):
        if verdict in measured:
            return verdict
    return NOT_APPLICABLE


def compile_outcome(variants):
    """The compile case's result from its variants' outcomes (stale/correct/refused/n.a./error)."""
    def listing(outcomes):
        return "; ".join(f"{name}: {v['detail']}" for name, v in variants.items()
                         if v["outcome"] in outcomes)

    result = _compile_result(variants, listing)
    result["detail"] = _clip(result["detail"])
    return result


def _compile_result(variants, listing):
    outcomes = set(v["outcome"] for v in variants.values())
    if "stale" in outcomes:
        others = listing(("correct", "refused", "error", NOT_APPLICABLE))
        stale = listing(("stale",))
        return {"verdict": AFFECTED,
                "detail": f"stale through torch.compile in {stale} (also tried: {others})"}
    if "error" in outcomes:
        return {"verdict": ERROR, "detail": "variants failed: " + listing(("error",))}
    if "refused" in outcomes:
        return {"verdict": REFUSED, "detail": "refused in " + listing(("refused",))}
    if "correct" in outcomes:
        tried = listing(("correct", NOT_APPLICABLE))
        return {"verdict": NOT_AFFECTED, "detail":
                f"no staleness reproduced through torch.compile (variants tried: {tried})"}
    return {"verdict": NOT_APPLICABLE, "detail": listing((NOT_APPLICABLE,))}


def exception_text(exc):
    """An exception and what it was raised over (capture_end may raise over the real error)."""
    messages, seen = [], exc
    while seen is not None and len(messages) < 5:
        messages.append(f"{type(seen).__name__}: {seen}")
        seen = seen.__cause__ or seen.__context__
    return _clip(" <- ".join(messages))


def names_lazy_copy(text):
    """Does an error message read like a refusal (names the capture and the lazy copy)? Supporting
    detail only: the verdict comes from `refusal_outcome`."""
    return bool(REFUSAL_CAPTURE.search(text) and REFUSAL_COPY.search(text))


def refusal_outcome(capture_error, outside_error):
    """A case whose step raised during capture, given what the same step did outside capture.

    `outside_error` is None when the step ran outside capture and gave the right values: the build
    can do the step and declines only under capture, so it `refused`, whatever its message says.
    Otherwise the step is broken in this build (or environment), which is an `error`. Whether the
    capture-time message names the lazy copy is kept in the record, never decides.
    """
    result = {"capture_error": capture_error, "message_names_lazy_copy":
              names_lazy_copy(capture_error)}
    if outside_error is None:
        result.update(verdict=REFUSED, outside_capture="succeeded", detail=_clip(
            "raised during capture; the same step outside capture succeeded: " + capture_error))
    else:
        result.update(verdict=ERROR, outside_capture=_clip(outside_error), detail=_clip(
            f"raised during capture ({capture_error}) and outside capture too ({outside_error})"))
    return result


def child_outcome(returncode, stdout, stderr, timed_out, timeout):
    """A case result from how its child process ended: result line, signal, timeout or status."""
    result = _result_line(stdout)
    if timed_out:
        return {"verdict": TIMEOUT, "detail": _clip(
            f"no result after {timeout:g} s; last output: {_tail(stderr or stdout)}")}
    if result is not None:
        if returncode:
            detail, status = result.get("detail", ""), _status_name(returncode)
            result["detail"] = f"{detail} (child then exited with {status})"
        return result
    if returncode < 0:
        name = _status_name(returncode)
        return {"verdict": CRASHED, "signal": name,
                "detail": _clip(f"killed by {name}: {_tail(stderr)}")}
    return {"verdict": ERROR, "detail": _clip(
        f"child exited with status {returncode} and no result: {_tail(stderr)}")}


def _result_line(stdout):
    for line in reversed((stdout or "").splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("verdict") in VERDICTS:
            return data
    return None


def _status_name(returncode):
    if returncode >= 0:
        return f"status {returncode}"
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _tail(text, lines=15):
    return "\n".join((text or "").strip().splitlines()[-lines:])


def _clip(text):
    return text if len(text) <= DETAIL_LIMIT else text[:DETAIL_LIMIT - 3] + "..."


# --- the parent: one child process per case, then one JSON document -------------------------------

def run_child(argv, timeout):
    """Run one child; its case result (see `child_outcome`) plus the wall time it took."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)  # compile workers are grandchildren: end the child's whole group
        stdout, stderr = proc.communicate()
    result = child_outcome(proc.returncode, stdout, stderr, timed_out, timeout)
    result["wall_seconds"] = round(time.perf_counter() - started, 3)
    return result


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()


def default_jobs():
    return max(1, min(MAX_DEFAULT_JOBS, os.cpu_count() or 1))


def run_probe(cases, trials, timeout, jobs):
    """Every case in its own process, settled against the controls and rolled up into the document.

    The forking helper runs them first; any case it did not finish (it died) runs in a fresh
    interpreter, as every case did before the helper existed. The environment is asked apart from
    the cases, at the same time (`probe_environment`), so a query that fails costs no case.
    """
    started = time.perf_counter()
    if not _torch_installed():
        return _document(dict.fromkeys(cases, _no_torch(
            "No module named 'torch'")), _bare_env(), cases, trials,
            timeout, jobs, None, started)
    envs = []
    asking = threading.Thread(target=lambda: envs.append(probe_environment(timeout)), daemon=True)
    asking.start()
    results, import_seconds = _run_forked_helper(cases, trials, timeout, jobs)
    missing = [name for name in cases if name not in results]
    if missing:
        _say(f"running {', '.join(missing)} in fresh interpreters")
        results.update(_run_cases(missing, trials, timeout, jobs))
    asking.join(timeout * (len(ENV_KEYS) + 1))
    results = {name: results[name] for name in cases}
    return _document(results, envs[0] if envs else _bare_env(), cases, trials, timeout, jobs,
                     import_seconds, started)


def _document(results, env, cases, trials, timeout, jobs, import_seconds, started):
    settled = settle(results)
    verdict = ERROR if torch_failed(settled) else roll_up(settled)
    return {"schema": SCHEMA, "probe": PROBE, "probe_version": PROBE_VERSION,
            "verdict": verdict, "exit_code": exit_code(verdict), "cases": settled,
            "env": env,
            "options": {"cases": list(cases), "trials": trials, "timeout": timeout,
                        "replays": REPLAYS, "jobs": jobs},
            "import_seconds": import_seconds,
            "seconds": round(time.perf_counter() - started, 3)}


def torch_failed(cases):
    """True when no case could import torch: the run could not start, which is an `error` (a
    control that never ran did not misbehave)."""
    return bool(cases) and all(c.get("torch_import_failed") for c in cases.values())


def cannot_tell(document):
    """The one line a person reads when nothing could be measured here at all, else None."""
    cases = document.get("cases") or {}
    if torch_failed(cases):
        first = next(iter(cases.values()))["detail"]
        return (f"cannot tell: {first} (Python {sys.executable}); run this script with the "
                "Python whose torch you want to check")
    if document.get("verdict") == SKIPPED:
        return (f"cannot tell: {NO_CUDA}; run this script on a machine with an NVIDIA GPU (and "
                "a CUDA build of torch)")
    return None


def _torch_installed():
    try:
        from importlib.util import find_spec
        return find_spec("torch") is not None
    except (ImportError, ValueError):
        return True  # let the import itself say what is wrong


def _no_torch(reason):
    return {"verdict": ERROR, "detail": f"torch does not import: {reason}",
            "torch_import_failed": True}


def _run_forked_helper(cases, trials, timeout, jobs):
    """(case name -> raw result, seconds torch took to import) from the `--_fork` helper.

    The helper reports each case as a JSON line. It enforces the per-case timeouts itself; should
    it stay silent for longer than one child may take, it is killed (its children die with it).
    """
    argv = [sys.executable, os.path.abspath(__file__), "--_fork", ",".join(cases),
            "--trials", str(trials), "--timeout", repr(timeout), "--jobs", str(jobs)]
    helper = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
    lines = queue.Queue()
    threading.Thread(target=_pump, args=(helper.stdout, lines), daemon=True).start()
    results, import_seconds = {}, None
    while len(results) < len(cases):
        try:
            message = lines.get(timeout=timeout + 30)
        except queue.Empty:
            _kill_group(helper)
            if import_seconds is None:  # a hanging `import torch` would hang every child too
                return _import_hung(cases, timeout), None
            break
        if message is None:
            break
        if "no_torch" in message:
            helper.wait()
            return dict.fromkeys(cases, _no_torch(message["no_torch"])), None
        if "import_seconds" in message:
            import_seconds = message["import_seconds"]
        elif message.get("case") in cases:
            results[message["case"]] = message["result"]
            _progress(message["case"], message["result"])
    helper.wait()
    return results, import_seconds


def _pump(stream, lines):
    """Reader thread: the helper's JSON lines into `lines`, then None at its end."""
    for line in stream:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            lines.put(message)
    lines.put(None)


def _import_hung(cases, timeout):
    detail = f"import torch did not finish within {timeout:g} s, so no case could start"
    return {name: {"verdict": TIMEOUT, "detail": detail} for name in cases}


def _run_cases(cases, trials, timeout, jobs):
    """Case name -> raw result, in `cases` order; `jobs` fresh interpreters at a time."""
    def one(name):
        result = run_child(_child_argv(name, trials), timeout)
        _progress(name, result)
        return result

    if jobs > 1:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            return dict(zip(cases, pool.map(one, cases)))
    results = {}
    for name in cases:
        if _found_no_gpu(results.values()):  # the first child found no GPU: spare the rest
            results[name] = _no_gpu()
        else:
            results[name] = one(name)
    return results


def _found_no_gpu(results):
    return any(r.get("verdict") == SKIPPED and r.get("detail") == NO_CUDA for r in results)


def _progress(name, result):
    """A case's line on stderr; none where nothing ran (no GPU, no torch): `cannot_tell` says it
    once for the run."""
    if result.get("verdict") != SKIPPED and not result.get("torch_import_failed"):
        _say(f"{name:<24} {result['verdict']:<14} {_seconds(result)}")


def _no_gpu():
    return {"verdict": SKIPPED, "detail": NO_CUDA, "seconds": 0.0}


# --- the forking helper: torch imported once, one forked child per case ---------------------------

def _fork_main(cases, trials, timeout, jobs):
    """`--_fork`: import torch before anything initialises CUDA, then fork a child per case.

    CUDA must not be initialised in a process that forks (the children could not use it), so this
    process only imports torch; each child initialises CUDA for itself, and a crash, a hang or a
    poisoned context stays in that child.
    """
    _die_with_parent()
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")  # see _child_main
    started = time.perf_counter()
    try:
        import torch  # noqa: F401 - loaded once here; every forked child finds it imported
    except Exception as exc:  # noqa: BLE001 - every case would fail the same way: said once
        _emit({"no_torch": exception_text(exc)})
        return 0
    _emit({"import_seconds": round(time.perf_counter() - started, 3)})
    variants = {}

    def report(name, result):
        case, _, variant = name.partition(":")
        if not variant:
            _emit({"case": case, "result": result})
            return
        variants[variant] = result
        _emit({"progress": name})  # a sign of life: the parent's watchdog waits one timeout
        if len(variants) == len(COMPILE_VARIANTS):
            _emit({"case": case, "result": merge_variants(variants)})

    units = [u for name in cases for u in (
        [f"{name}:{v}" for v in COMPILE_VARIANTS] if name == COMPILE_CASE else [name])]
    run_forked(units, lambda name: _child_main(name, trials), timeout, jobs, report)
    return 0


def merge_variants(parts):
    """The compile case from its variants' children (variant -> that child's result).

    A child that ended without judging its variant (crash, timeout, no GPU, no torch.compile)
    counts as that variant's error; if that is all the case has, the case carries that failure,
    as the whole case's child would have.
    """
    plain = [p for p in parts.values() if "variants" not in p]
    if len(plain) == len(parts) and len({p["verdict"] for p in plain}) == 1:
        return dict(plain[0])  # e.g. skipped (no GPU) or not_applicable, the same in every child
    variants = {}
    for name in COMPILE_VARIANTS:
        part = parts[name]
        variants[name] = (part.get("variants") or {}).get(name) or {
            "outcome": "error", "detail": f"{part['verdict']}: {part.get('detail', '')}"}
    result = compile_outcome(variants)
    failed = [p["verdict"] for p in plain if p["verdict"] in FAILURES]
    if result["verdict"] == ERROR and failed:
        result["verdict"] = min(failed, key=FAILURES.index)
    result["variants"] = variants
    for key in ("seconds", "wall_seconds"):  # the variants ran at once: the slowest bounds it
        result[key] = max(p.get(key, 0.0) for p in parts.values())
    return result


def _emit(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def run_forked(cases, child, timeout, jobs, report):
    """Fork `child(name)` for each case, `jobs` at a time, slow cases first; `report(name, result)`
    as each ends. `child` writes its result line to stdout and exits (see `_child_main`)."""
    pending = sorted(cases, key=lambda name: name.partition(":")[0] not in SLOW_FIRST)
    running, finished = {}, []
    with tempfile.TemporaryDirectory(prefix="stale_replay-") as folder:
        while pending or running:
            while pending and len(running) < jobs:
                name = pending.pop(0)
                if _found_no_gpu(finished):  # a child found no GPU: spare the rest
                    report(name, _no_gpu())
                    continue
                running[_fork_case(name, child, folder)] = (name, time.perf_counter())
            for pid, (name, result) in _reap(running, timeout, folder):
                del running[pid]
                finished.append(result)
                report(name, result)
            time.sleep(0.01)


def _fork_case(name, child, folder):
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    try:  # the child: its own process group (compile workers die with it) and output files
        os.setpgid(0, 0)
        for fd, suffix in ((1, ".out"), (2, ".err")):
            handle = os.open(os.path.join(folder, name + suffix),
                             os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(handle, fd)
            os.close(handle)
        # whoever replaced sys.stdout/err (a test runner's capture) must not keep the output
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - lives until os._exit
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        child(name)
    except BaseException:  # noqa: BLE001 - said on stderr, which becomes the case's detail
        import traceback

        traceback.print_exc()
    finally:
        sys.stderr.flush()
        os._exit(70)  # `child` exits by itself; reaching here means it raised


def _reap(running, timeout, folder):
    """(pid, (name, result)) for each child that ended or ran out of time (then killed)."""
    ended = []
    for pid, (name, began) in list(running.items()):
        done, status = os.waitpid(pid, os.WNOHANG)
        timed_out = not done and time.perf_counter() - began >= timeout
        if timed_out:
            _kill_pid_group(pid)
            done, status = os.waitpid(pid, 0)
        if not done:
            continue
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        out, err = (_read(os.path.join(folder, name + suffix)) for suffix in (".out", ".err"))
        result = child_outcome(code, out, err, timed_out, timeout)
        result["wall_seconds"] = round(time.perf_counter() - began, 3)
        ended.append((pid, (name, result)))
    return ended


def _kill_pid_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:  # killed before it made its own group
        os.kill(pid, signal.SIGKILL)


def _read(path):
    try:
        with open(path, errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def _bare_env():
    """`env` when no child reported one (torch does not import): the cases say why."""
    env = dict.fromkeys(("torch", "git_version", "cuda_runtime", "cudnn", "driver", "gpu",
                         "capability"))
    env.update(python=platform.python_version(), platform=platform.platform())
    return env


def _child_argv(case, trials):
    return [sys.executable, os.path.abspath(__file__), "--_child", case, "--trials", str(trials)]


def _seconds(result):
    return f"{result.get('seconds', 0.0):.1f} s ({result.get('wall_seconds', 0.0):.1f} s wall)"


def _say(message):
    sys.stderr.write(f"[{PROBE}] {message}\n")
    sys.stderr.flush()


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{PROBE}: {message}\n")
        sys.exit(USAGE_EXIT)


def _parse(argv):
    parser = _Parser(prog="stale_replay.py", description="Stale copy-on-write data under CUDA "
                     "Graph replay and side streams; prints one JSON document.")
    parser.add_argument("--cases", default=",".join(CASES),
                        help="comma-separated cases (the two controls always run): "
                        + ", ".join(CASES))
    parser.add_argument("--trials", type=int, default=DEFAULT_TRIALS,
                        help="side_stream trials (default %(default)s)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help="seconds per case before it counts as a timeout (default %(default)s)")
    parser.add_argument("--jobs", type=int, default=default_jobs(),
                        help="processes at once: cases, and each torch.compile variant "
                        f"(default: the CPUs here, at most {MAX_DEFAULT_JOBS})")
    parser.add_argument("--json", metavar="PATH", help="write the document here, not to stdout")
    parser.add_argument("--_child", help=argparse.SUPPRESS)
    parser.add_argument("--_fork", help=argparse.SUPPRESS)
    parser.add_argument("--_env", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._child or args._fork or args._env:
        return args
    wanted = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in wanted if c not in CASES]
    if unknown:
        parser.error(f"unknown case {', '.join(unknown)} in --cases; "
                     f"choose from {', '.join(CASES)}")
    if args.trials < 1 or args.timeout <= 0 or args.jobs < 1:
        parser.error("--trials, --timeout and --jobs must be positive")
    args.cases = [c for c in CASES if c in wanted or c in CONTROLS]
    return args


def main(argv=None):
    args = _parse(argv)
    if args._child:
        return _child_main(args._child, args.trials)
    if args._env:
        return _env_main([key for key in args._env.split(",") if key in ENV_KEYS])
    if args._fork:
        return _fork_main(args._fork.split(","), args.trials, args.timeout, args.jobs)
    document = run_probe(args.cases, args.trials, args.timeout, args.jobs)
    text = json.dumps(document, indent=2, sort_keys=False) + "\n"
    nothing = cannot_tell(document)
    if args.json:
        with open(args.json, "w") as handle:
            handle.write(text)
    elif nothing and sys.stdout.isatty():
        # A person at a terminal, and nothing was measured: the line says all there is, where
        # the document would add some 70 lines of "error" (a pipe or a file still gets it).
        nothing += "; --json PATH writes the document"
    else:
        sys.stdout.write(text)
    _say(nothing or f"verdict: {document['verdict']} (exit {document['exit_code']}) in "
         f"{document['seconds']:.1f} s")
    return document["exit_code"]


# --- the child: one case, torch imported here and only here ---------------------------------------

class NotApplicable(Exception):
    """The build lacks an API this case needs."""


def _die_with_parent():
    """Linux: SIGKILL this child when the probe that started it dies (even by SIGKILL), so a
    stopped matrix run leaves no case running on the GPU."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _child_main(case, trials):
    started = imported = time.perf_counter()
    _die_with_parent()
    if case.startswith(COMPILE_CASE):  # tiny kernels compile faster in-process than in a pool
        os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - said once for the whole run (see run_probe)
        result = _no_torch(exception_text(exc))
    else:
        imported = time.perf_counter()
        try:
            result = _run_case(torch, case, trials)
        except Exception as exc:  # noqa: BLE001 - the one place an exception becomes a verdict
            result = {"verdict": ERROR, "detail": exception_text(exc),
                      "message_names_lazy_copy": names_lazy_copy(exception_text(exc))}
    result["seconds"] = round(time.perf_counter() - imported, 3)
    result["import_seconds"] = round(imported - started, 3)
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # some builds crash in interpreter teardown; the result is already out


def _run_case(torch, case, trials):
    """`case`, or `case:variant` for one variant of the compile case (see `_fork_main`)."""
    return _measure(torch, case, trials)


def _measure(torch, case, trials):
    if not torch.cuda.is_available():
        return {"verdict": SKIPPED, "detail": NO_CUDA}
    name, _, variant = case.partition(":")
    try:
        return _CASES[name](torch, trials, *([variant] if variant else []))
    except NotApplicable as exc:
        return {"verdict": NOT_APPLICABLE, "detail": str(exc)}


def _require(condition, what):
    if not condition:
        raise NotApplicable(f"{what} is absent in this build")


def _needs_lazy_clone(torch):
    _require(hasattr(torch, "_lazy_clone"), "torch._lazy_clone")


def _needs_graphs(torch):
    _require(hasattr(torch.cuda, "graph") and hasattr(torch.cuda, "CUDAGraph"), "torch.cuda.graph")


def _replayed(torch, body, before=None, refusable=True):
    """Capture `body(x, early)` with x full of NaN; count replays whose output is not 2 * fresh x.

    `early` is what `before(x)` made ahead of capture (the positive control's outside copy). When
    the capture raises and the case is `refusable`, the same step runs again outside capture to
    tell a refusal from a broken step (`refusal_outcome`); a control's failure stays an error.
    """
    x = torch.full((NUMEL,), float("nan"), device="cuda")
    early = before(x) if before else None
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    try:
        with torch.cuda.graph(graph):
            out = body(x, early)
    except Exception as exc:  # noqa: BLE001 - judged by what the same step does outside capture
        if not refusable:
            raise
        return refusal_outcome(exception_text(exc), _outside_capture(torch, body, before))
    torch.cuda.synchronize()
    stale = 0
    for _ in range(REPLAYS):
        x.copy_(torch.rand(NUMEL, device="cuda"))
        graph.replay()
        torch.cuda.synchronize()
        stale += not torch.equal(out, x * 2)
    return compared(stale, REPLAYS)


def _outside_capture(torch, body, before=None):
    """Run `body` eagerly on fresh data: None when it gives 2 * x, else what went wrong."""
    try:
        torch.cuda.synchronize()
        x = torch.rand(NUMEL, device="cuda")
        out = body(x, before(x) if before else None)
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - the step itself is broken in this build
        return exception_text(exc)
    return None if torch.equal(out, x * 2) else "outside capture it gave wrong values"


def case_capture_data_ptr(torch, trials):
    _needs_lazy_clone(torch)
    _needs_graphs(torch)

    def body(x, early):
        y = torch._lazy_clone(x)
        y.data_ptr()  # asks for a mutable pointer: materializes the copy during capture
        return y * 2
    return _replayed(torch, body)


def case_capture_write(torch, trials):
    _needs_lazy_clone(torch)
    _needs_graphs(torch)

    def body(x, early):
        y = torch._lazy_clone(x)
        y.mul_(2)  # the in-place write materializes the copy during capture
        return y
    return _replayed(torch, body)


def case_control_clone(torch, trials):
    _needs_graphs(torch)
    return _replayed(torch, lambda x, early: x.clone() * 2, refusable=False)


def case_control_stale(torch, trials):
    _needs_graphs(torch)
    return _replayed(torch, lambda x, early: early * 2, before=lambda x: x.clone(),
                     refusable=False)


def case_raw_pointer_triton(torch, trials):
    _needs_lazy_clone(torch)
    _needs_graphs(torch)
    kernel = _triton_double()
    grid = (_cdiv(NUMEL, 1024),)
    warm = torch.zeros(NUMEL, device="cuda")
    try:
        kernel[grid](warm, torch.empty_like(warm), NUMEL, BLOCK=1024)  # compile outside capture
    except Exception as exc:  # noqa: BLE001 - named when the environment lacks Triton's toolchain
        named = _without_toolchain(exc)
        if named is None:
            raise
        raise named from exc

    def body(x, early):
        y = torch._lazy_clone(x)
        out = torch.empty_like(x)
        kernel[grid](y, out, NUMEL, BLOCK=1024)  # Triton's launcher calls y.data_ptr()
        return out
    return _replayed(torch, body)


def _without_toolchain(exc):
    """Triton builds its launcher with a C compiler against Python.h the first time a kernel
    runs; where either is missing that is the environment's failure, said as such (the case
    stays `error`: nothing was measured).  None for any other failure."""
    text = exception_text(exc)
    compiler = "C compiler" in text
    build = isinstance(exc, subprocess.CalledProcessError) and any(
        os.path.basename(str(word)) in ("gcc", "clang", "cc") for word in (exc.cmd or [])[:1])
    if not (compiler or build):
        return None
    return RuntimeError(
        "Triton needs a C compiler in the environment (gcc or clang, with libc headers and "
        "Python.h: on Debian/Ubuntu `apt-get install gcc libc6-dev python3-dev`; CC picks "
        "another) to build its kernel launcher")


def _cdiv(a, b):
    return (a + b - 1) // b


def _triton_double():
    try:
        import triton
        import triton.language as tl
    except Exception as exc:  # noqa: BLE001 - absent or broken Triton: nothing to measure
        raise NotApplicable(f"triton does not import ({exc})") from exc
    globals()["tl"] = tl  # triton resolves names in the kernel through its module's globals

    @triton.jit
    def double_kernel(src, dst, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(dst + offsets, tl.load(src + offsets, mask=mask) * 2, mask=mask)
    return double_kernel


def case_side_stream(torch, trials):
    _needs_lazy_clone(torch)
    _require(hasattr(torch.cuda, "_sleep"), "torch.cuda._sleep")
    stream = torch.cuda.Stream()
    _side_stream_correct(torch, stream, 0.5)  # warm-up: a fresh cudaMalloc would synchronize
    stale = sum(not _side_stream_correct(torch, stream, float(i + 1)) for i in range(trials))
    return compared(stale, trials, unit="trials")


def _side_stream_correct(torch, stream, value):
    """One trial: does the lazy clone hold what the side stream wrote before it was cloned?"""
    x = torch.full((NUMEL,), float("nan"), device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(SLEEP_CYCLES)  # keeps the producer busy while the copy is issued
        x.fill_(value)
        y = torch._lazy_clone(x)
        y.data_ptr()
    torch.cuda.synchronize()
    if not bool((x == value).all()):
        raise RuntimeError("the side-stream producer did not write x: the trial proves nothing")
    return bool((y == value).all())


def case_compile_reduce_overhead(torch, trials, only=None):
    """Every variant, or `only` that one (the forking helper runs each in a child of its own)."""
    _needs_lazy_clone(torch)
    _require(hasattr(torch, "compile"), "torch.compile")
    _needs_dynamo_here(torch)
    _needs_triton()
    variants = {}
    for name, variant in _COMPILE_VARIANTS:
        if only and name != only:
            continue
        variants[name] = _compile_variant(torch, variant)
        _say(f"compile variant {name}: {variants[name]['detail']}")
    result = compile_outcome(variants)
    result["variants"] = variants
    return result


def _needs_dynamo_here(torch):
    """torch.compile on a Python its Dynamo does not support (2.2 - 2.3 on 3.12) measures nothing:
    Dynamo says so itself (`check_if_dynamo_supported`, where the build has it)."""
    import torch._dynamo.eval_frame as frame  # noqa: F401 - only the compile case pays for it

    check = getattr(frame, "check_if_dynamo_supported", None)
    try:
        if check is not None:
            check()
    except RuntimeError as exc:
        raise NotApplicable(f"torch.compile does not run here: {exc} (Python "
                            f"{platform.python_version()})") from exc


def _needs_triton():
    """reduce-overhead on CUDA generates Triton kernels: with no Triton installed nothing can be
    compiled. A Triton that imports but does not fit the build stays an `error` (it is broken)."""
    try:
        import triton  # noqa: F401
    except ImportError as exc:
        raise NotApplicable(f"torch.compile on CUDA needs Triton, which does not import here "
                            f"({exc})") from exc


def _compile_variant(torch, variant):
    torch._dynamo.reset()
    counts = _compile_counters(torch)
    try:
        stale = sum(not correct for correct in variant(torch, _reduce_overhead(torch)))
    except NotApplicable as exc:
        return {"outcome": NOT_APPLICABLE, "detail": str(exc)}
    except Exception as exc:  # noqa: BLE001 - one variant's failure must not hide the others
        return _variant_failed(torch, variant, exception_text(exc))
    outcome = "stale" if stale else "correct"
    detail = f"{outcome} on {stale or COMPILE_CALLS}/{COMPILE_CALLS} calls"
    breaks, skips = [now - then for now, then in zip(_compile_counters(torch), counts)]
    if breaks:
        detail += f"; {breaks} Dynamo graph break(s)"
    if skips:
        detail += "; inductor skipped cudagraphs"
    return {"outcome": outcome, "detail": detail, "stale_trials": stale, "trials": COMPILE_CALLS}


def _variant_failed(torch, variant, error):
    """A variant raised under reduce-overhead: the same compiled code with cudagraphs off (nothing
    captured) tells a refusal from a broken step, as `refusal_outcome` says."""
    torch._dynamo.reset()
    try:
        stale = sum(not correct for correct in variant(torch, torch.compile))
        outside = f"without cudagraphs it was wrong on {stale}/{COMPILE_CALLS} calls" if stale \
            else None
    except Exception as exc:  # noqa: BLE001 - broken without capture too
        outside = exception_text(exc)
    judged = refusal_outcome(error, outside)
    return {"outcome": "refused" if judged["verdict"] == REFUSED else "error",
            "detail": judged["detail"],
            "message_names_lazy_copy": judged["message_names_lazy_copy"]}


def _compile_counters(torch):
    """(graph breaks, cudagraph skips) so far: where the lazy clone really ran is in these."""
    try:
        from torch._dynamo.utils import counters
        return sum(counters["graph_break"].values()), counters["inductor"]["cudagraph_skips"]
    except Exception:  # noqa: BLE001 - older builds do not count these
        return 0, 0


def _calls(torch, compiled, make_call):
    """Call `compiled` COMPILE_CALLS times on fresh inputs; yield whether each output was right.

    `make_call()` returns (args, expected, still_ok): `expected` is computed before the call (the
    call may mutate its inputs) and `still_ok()` checks what must hold afterwards.
    """
    mark_step = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)
    for _ in range(COMPILE_CALLS):
        if mark_step:
            mark_step()
        args, expected, still_ok = make_call()
        out = compiled(*args)
        torch.cuda.synchronize()
        yield torch.equal(out, expected) and still_ok()


def _reduce_overhead(torch):
    return lambda fn: torch.compile(fn, mode="reduce-overhead")


def _fresh(torch):
    return torch.rand(NUMEL, device="cuda")


def _variant_inline_inplace(torch, compiled):
    """A lazy clone written in place inside the compiled function."""
    def fn(x):
        y = torch._lazy_clone(x)
        y.mul_(2)
        return y

    def make_call():
        x = _fresh(torch)
        return (x,), x * 2, lambda: True
    return _calls(torch, compiled(fn), make_call)


def _variant_cow_input_mutated(torch, compiled):
    """A lazy clone made in eager code, passed in and written in place; its source must not move."""
    def fn(y):
        y.mul_(2)
        return y + 1

    def make_call():
        x = _fresh(torch)
        before = x.clone()
        return (torch._lazy_clone(x),), x * 2 + 1, lambda: torch.equal(x, before)
    return _calls(torch, compiled(fn), make_call)


def _variant_static_input(torch, compiled):
    """A lazy clone of a module buffer (a static cudagraph input) written in place."""
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("w", _fresh(torch))

        def forward(self, x):
            y = torch._lazy_clone(self.w)
            y.add_(x)
            return y

    model = Model()

    def make_call():
        model.w.copy_(_fresh(torch))
        x = _fresh(torch)
        return (x,), model.w + x, lambda: True
    return _calls(torch, compiled(model), make_call)


def _variant_graph_break_data_ptr(torch, compiled):
    """data_ptr() of a lazy clone in the compiled function: Dynamo breaks the graph there."""
    def fn(x):
        y = torch._lazy_clone(x)
        y.data_ptr()
        return y * 2

    def make_call():
        x = _fresh(torch)
        return (x,), x * 2, lambda: True
    return _calls(torch, compiled(fn), make_call)


def _variant_aten_op_in_graph(torch, compiled):
    """torch.ops.aten._lazy_clone, which Dynamo traces (torch._lazy_clone makes it break the graph).

    Inductor decomposes the op into a real clone where it has that decomposition; a build that
    instead runs the aten kernel inside the recorded graph would materialize during capture.
    """
    _require(hasattr(torch.ops.aten, "_lazy_clone"), "torch.ops.aten._lazy_clone")

    def fn(x):
        y = torch.ops.aten._lazy_clone(x)
        y.mul_(2)
        return y

    def make_call():
        x = _fresh(torch)
        return (x,), x * 2, lambda: True
    return _calls(torch, compiled(fn), make_call)


def _variant_custom_op_data_ptr(torch, compiled):
    """An opaque custom op (as a Triton/CuTe wrapper is) lazy-clones its input and takes data_ptr().

    Inductor cannot see inside it, so the clone stays lazy and is materialized while the
    cudagraph tree records.
    """
    lazy_double = _lazy_double_op(torch)

    def make_call():
        x = _fresh(torch)
        return (x,), x * 2, lambda: True
    return _calls(torch, compiled(lambda x: lazy_double(x)), make_call)


_OPS = {}  # an op name registers once per process; the refusal check compiles the variant again


def _lazy_double_op(torch):
    if "lazy_double" in _OPS:
        return _OPS["lazy_double"]
    library = getattr(torch, "library", None)
    _require(hasattr(library, "custom_op"), "torch.library.custom_op")

    @library.custom_op("stale_replay_probe::lazy_double", mutates_args=())
    def lazy_double(x: torch.Tensor) -> torch.Tensor:
        y = torch._lazy_clone(x)
        y.data_ptr()
        return y * 2

    @lazy_double.register_fake
    def _(x):
        return torch.empty_like(x)
    _OPS["lazy_double"] = lazy_double
    return lazy_double


_COMPILE_VARIANTS = (
    ("inline_inplace", _variant_inline_inplace),
    ("cow_input_mutated", _variant_cow_input_mutated),
    ("static_input", _variant_static_input),
    ("graph_break_data_ptr", _variant_graph_break_data_ptr),
    ("aten_op_in_graph", _variant_aten_op_in_graph),
    ("custom_op_data_ptr", _variant_custom_op_data_ptr),
)

COMPILE_VARIANTS = tuple(name for name, _ in _COMPILE_VARIANTS)

_CASES = {
    "capture_data_ptr": case_capture_data_ptr,
    "capture_write": case_capture_write,
    "side_stream": case_side_stream,
    "compile_reduce_overhead": case_compile_reduce_overhead,
    "raw_pointer_triton": case_raw_pointer_triton,
    "control_clone": case_control_clone,
    "control_stale": case_control_stale,
}


# --- the environment: asked once, apart from the cases ------------------------------------------

# In the order they are asked: those that load a library (CUDA, cuDNN) last, so a query that aborts
# the process (a broken or stand-in library) costs only itself: the rest are asked again without it.
ENV_KEYS = ("torch", "git_version", "cuda_runtime", "python", "platform", "triton", "driver",
            "cuda_available", "gpu", "gpu_uuid", "capability", "device_count", "cudnn")


def _env_queries(torch):
    def cuda(fn):
        return lambda: fn() if torch.cuda.is_available() else None

    return {"torch": lambda: torch.__version__,
            "git_version": lambda: getattr(torch.version, "git_version", None),
            "cuda_runtime": lambda: getattr(torch.version, "cuda", None),
            "python": platform.python_version,
            "platform": platform.platform,
            "triton": lambda: (_distribution_version("triton")
                               or _distribution_version("pytorch-triton")),
            "driver": _driver_version,
            "cuda_available": lambda: bool(torch.cuda.is_available()),
            "gpu": cuda(lambda: torch.cuda.get_device_name(0)),
            "gpu_uuid": cuda(lambda: _gpu_uuid(torch)),
            "capability": cuda(lambda: "{}.{}".format(*torch.cuda.get_device_capability(0))),
            "device_count": cuda(lambda: torch.cuda.device_count()),
            "cudnn": lambda: torch.backends.cudnn.version()}


def _env_main(skip):
    """`--_env [SKIP]`: ask each environment query not in SKIP, one JSON line before and after."""
    _die_with_parent()
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - the cases say why; the environment stays bare
        _emit({"no_torch": exception_text(exc)})
        os._exit(0)
    queries = _env_queries(torch)
    for key in ENV_KEYS:
        if key in skip:
            continue
        _emit({"asking": key})
        try:
            _emit({"answer": key, "value": _plain(queries[key]())})
        except Exception as exc:  # noqa: BLE001 - an unknown value, with the reason
            _emit({"failed": key, "reason": exception_text(exc)})
    _emit({"env_done": True})
    os._exit(0)


def _plain(value):
    return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)


def gather_env(run_one):
    """The document's `env` from `run_one(skip)` -> (how it ended, stdout, stderr), which runs the
    queries not in `skip`. A query that ends the process (an abort in a library) reads as unknown
    with the reason, and the queries after it are asked again in a new process; a query that
    raises reads as unknown too. Unknowns are listed in env["unknown"]; None when torch does not
    import (the cases say why)."""
    env, unknown, lost = {}, {}, "not asked"
    for _ in range(len(ENV_KEYS)):
        ended, stdout, stderr = run_one(sorted(set(env) | set(unknown)))
        asking, done = None, False
        for message in _json_lines(stdout):
            if "no_torch" in message:
                return None
            if "asking" in message:
                asking = message["asking"]
            elif "answer" in message:
                env[message["answer"]], asking = message["value"], None
            elif "failed" in message:
                unknown[message["failed"]], asking = message["reason"], None
            done = done or bool(message.get("env_done"))
        if done:
            break
        if asking is None:
            lost = _clip(f"not asked: the query process ended ({ended}): {_tail(stderr, 3)}")
            break
        unknown[asking] = _clip(f"asking it ended the process ({ended}): {_tail(stderr, 3)}")
    for key in ENV_KEYS:
        if key not in env:
            env[key] = None
            unknown.setdefault(key, lost)
    if unknown:
        env["unknown"] = unknown
    return env


def _json_lines(text):
    for line in (text or "").splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            yield message


def probe_environment(timeout):
    """`gather_env` over fresh interpreters (`--_env`): no case shares a process with a query."""
    def run_one(skip):
        argv = [sys.executable, os.path.abspath(__file__), "--_env", ",".join(skip) or "-"]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                errors="replace", start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            stdout, stderr = proc.communicate()
            return f"no answer within {timeout:g} s", stdout, stderr
        return _status_name(proc.returncode), stdout, stderr

    env = gather_env(run_one)
    return env if env is not None else _bare_env()


def _gpu_uuid(torch):
    """The UUID of the GPU this ran on, as nvidia-smi and CUDA_VISIBLE_DEVICES spell it."""
    uuid = str(torch.cuda.get_device_properties(0).uuid)
    return uuid if uuid.startswith(("GPU-", "MIG-")) else "GPU-" + uuid


def _driver_version():
    try:  # instant, and present wherever the GPU is exposed (containers too)
        with open("/proc/driver/nvidia/version") as handle:
            match = re.search(r"Kernel Module(?: for \S+)?\s+([0-9.]+)", handle.read())
        if match:
            return match.group(1)
    except OSError:
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True, timeout=30)
        lines = out.stdout.strip().splitlines()
        return lines[0].strip() if out.returncode == 0 and lines else None
    except (OSError, subprocess.SubprocessError):
        return None


def _distribution_version(name):
    try:
        from importlib import metadata
        return metadata.version(name)
    except Exception:  # noqa: BLE001 - not installed
        return None


if __name__ == "__main__":
    sys.exit(main())
