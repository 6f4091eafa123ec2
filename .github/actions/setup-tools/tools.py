"""nox and uv for one job: a venv of the pinned tools, built once per runner and reused.

Usage: python3 tools.py REQUIREMENTS CACHE_ROOT; prints the venv's bin folder (the rest of its
output goes to stderr, into the job's log).

A self-hosted runner keeps its tool cache between jobs, so each job building the same venv again
(15-25 s of venv and pip) is waste.  The venv for one requirements file and one interpreter lives
under CACHE_ROOT/torchbisect-tools/, built in a folder of its own and published by renaming a
symlink onto it, which is atomic: a job killed mid-build leaves a folder nobody links, two jobs
building at once both end with a complete venv, and a job never runs a half-installed one.  Jobs
sharing a tool cache take turns to build (CACHE_ROOT/torchbisect-tools.lock): a job that finds
another building waits for it and reuses its venv rather than building a second at the same time;
a turn not given back within WAIT (a stuck build) is waited for no longer.  A venv whose python
no longer runs (its interpreter was upgraded away) is built again.  Folders no link names and
links unused for a week are pruned.  Standalone: stdlib only, Python 3.8 syntax,
as it runs on any runner's python3 before anything else is installed.
"""

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import fcntl
except ImportError:  # Windows: there jobs build side by side, as without the lock
    fcntl = None

DONE = "torchbisect-tools.done"  # written last: the venv under it is complete
UNUSED = 7 * 24 * 3600  # a link unused this long (and its venv) is pruned
ABANDONED = 2 * 24 * 3600  # a folder no link names, this old, is no job's (jobs end in 6 h)
WAIT = 15 * 60  # a build takes 15-45 s; one still holding the lock after this is stuck


def say(line):
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def key_of(requirements):
    """Same pins and same interpreter, same venv."""
    digest = hashlib.sha256(requirements)
    digest.update(sys.version.encode())
    digest.update(os.path.realpath(sys.executable).encode())
    return digest.hexdigest()[:16]


def usable(venv, requirements):
    done = os.path.join(venv, DONE)
    try:
        with open(done, "rb") as f:
            if f.read() != requirements:
                return False
    except OSError:
        return False
    python = os.path.join(venv, "bin", "python")
    try:
        return subprocess.run([python, "-c", "pass"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0
    except OSError:  # no interpreter there at all
        return False


def build(root, key, requirements_file, requirements):
    """The venv's folder, or None (said) when venv or pip failed; nothing is left of it then."""
    venv = tempfile.mkdtemp(prefix=key + ".", dir=root)
    os.chmod(venv, 0o755)  # as any venv: mkdtemp makes it private
    started = time.monotonic()
    say("nox and uv: building a venv in " + venv)
    for argv in ([sys.executable, "-m", "venv", venv],
                 [os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q",
                  "--disable-pip-version-check", "-r", requirements_file]):
        code = subprocess.run(argv, stdout=sys.stderr).returncode
        if code != 0:
            say("nox and uv: `{}` failed (exit {}); no venv was kept".format(" ".join(argv), code))
            shutil.rmtree(venv, ignore_errors=True)
            return None
    with open(os.path.join(venv, DONE), "wb") as f:
        f.write(requirements)
    say(f"nox and uv: built in {time.monotonic() - started:.0f} s")
    return venv


@contextlib.contextmanager
def turn_to_build(cache_root):
    """Held by this job while the block runs (the kernel gives it back when the job dies too);
    after WAIT seconds of waiting for it, the block runs without it."""
    with open(os.path.join(cache_root, "torchbisect-tools.lock"), "a") as lock:
        deadline = time.monotonic() + WAIT
        waiting = False
        while fcntl is not None:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() > deadline:
                    say(f"nox and uv: waited {WAIT} s for another job's build; building one of "
                        "this job's own beside it")
                    break
                if not waiting:
                    say("nox and uv: another job is building them; waiting for it")
                    waiting = True
                time.sleep(0.5)
        yield


def publish(root, key, venv):
    """Point root/key at venv; the rename replaces whatever link was there, atomically."""
    staged = os.path.join(root, f".{key}.{os.getpid()}.link")
    os.symlink(os.path.basename(venv), staged)
    os.replace(staged, os.path.join(root, key))


def prune(root, keep):
    now = time.time()
    linked = set()
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if not os.path.islink(path):
            continue
        if name != keep and now - os.lstat(path).st_mtime > UNUSED:
            target = os.path.join(root, os.readlink(path))
            os.unlink(path)
            shutil.rmtree(target, ignore_errors=True)
        else:
            linked.add(os.readlink(path))
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if name in linked or os.path.islink(path) or name == keep:
            continue
        if now - os.lstat(path).st_mtime > ABANDONED:
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)


def reuse(link, requirements):
    """Whether the venv `link` names is complete and runs (then it counts as used)."""
    venv = os.path.realpath(link)
    if not (os.path.islink(link) and usable(venv, requirements)):
        return False
    os.utime(link, follow_symlinks=False)  # used: not pruned for another week
    say("nox and uv: reusing " + venv)
    return True


def main(argv):
    requirements_file, cache_root = argv
    with open(requirements_file, "rb") as f:
        requirements = f.read()
    root = os.path.join(cache_root, "torchbisect-tools")
    os.makedirs(root, exist_ok=True)
    key = key_of(requirements)
    link = os.path.join(root, key)
    if not reuse(link, requirements):
        with turn_to_build(cache_root):
            # the job that held the turn may have built this very venv meanwhile
            if not reuse(link, requirements):
                venv = build(root, key, requirements_file, requirements)
                if venv is None:
                    return 1
                publish(root, key, venv)
    prune(root, key)
    # the folder the link names now: a link replaced later never changes this job's tools
    print(os.path.join(os.path.realpath(link), "bin"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
