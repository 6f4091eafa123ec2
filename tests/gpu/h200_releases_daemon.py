"""The lent H200: rebuild the carried releases as they arrive and measure each with torchbisect.

Harness, not product (README.md here). Started once by `h200_releases.sh setup` (setsid: it
outlives the device call), it reads the parts `h200_releases.sh part` moves into H/incoming/, in
order, as one stream of bundles (h200_releases_pack.py), and for each bundle:

  runtime  the CUDA 12.x runtime, NVRTC and CUPTI wheels  -> pip install --target H/cuda/<minor>
  triton   a packed Triton wheel  -> rebuilt (sha256 checked), pip install --target H/triton/<v>
  torch    a packed torch wheel   -> rebuilt into H/wheels (sha256 checked), its stand-ins built
           (standins.py), then `torchbisect matrix` over the releases rebuilt so far (the run's
           matrix file, old_releases.RUNS; only the entries whose wheel is there): the store keeps
           every verdict, so each run probes only the new release.

Everything is logged to H/daemon.log; H/done lists what finished. Stdlib only, Python 3.12.
"""

import hashlib
import json
import os
import queue
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from old_releases import MACHINE, NO_TRITON, RELEASES, RUN, stream  # noqa: E402

H = os.environ.get("H200_RELEASES", "/tmp/h200r")
REPO = os.path.join(H, "repo")
TOOLS = os.path.join(H, "setup", "tools")
LOG = os.path.join(H, "daemon.log")
BY_VERSION = {r.version: r for r in RELEASES}
# A kind's run (old_releases.Run.kind) starts its shard's store empty, as the service's probe job
# does; the others add to a copy of reports/evidence/results.sqlite (h200_releases.sh setup).
STORE = os.path.join(H, "evidence", "shard.sqlite" if RUN.kind else "results.sqlite")


def say(message):
    line = f"{time.strftime('%H:%M:%S')} {message}"
    with open(LOG, "a") as handle:
        handle.write(line + "\n")


def done(key):
    with open(os.path.join(H, "done"), "a") as handle:
        handle.write(key + "\n")


def tool_env():
    """PATH with the carried zstd, zip and readelf first (h200_releases.sh setup: wrappers)."""
    env = dict(os.environ)
    env["PATH"] = os.path.join(H, "bin") + os.pathsep + env["PATH"]
    return env


def run(argv, env=None, log=None):
    with open(log or LOG, "a") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        subprocess.run(
            argv, check=True, stdout=out, stderr=subprocess.STDOUT, env=env or tool_env()
        )


class Stream:
    """The parts in H/incoming/sNNN/part, read in order as one file, waiting for the next."""

    def __init__(self):
        self.index, self.handle = 0, None

    def _next(self):
        path = os.path.join(H, "incoming", f"s{self.index:03d}", "part")
        while not os.path.exists(path + ".ready"):
            time.sleep(0.5)
        self.handle, self.index = open(path, "rb"), self.index + 1  # noqa: SIM115 - closed in read

    def read(self, size):
        chunks = []
        while size:
            if self.handle is None:
                self._next()
            chunk = self.handle.read(size)
            if not chunk:
                name = self.handle.name
                self.handle.close()
                os.remove(name)  # read: the disk is needed for what it held
                self.handle = None
                continue
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def readline(self):
        line = b""
        while not line.endswith(b"\n"):
            line += self.read(1)
        return line


def bundles():
    reader = Stream()
    for kind, name in stream():
        header = json.loads(reader.readline())
        if (header["kind"], header["name"]) != (kind, name):
            raise SystemExit(f"expected {kind} {name} in the stream, found {header}")
        body = reader.read(header["bytes"])
        if hashlib.sha256(body).hexdigest() != header["sha256"]:
            raise SystemExit(f"{kind} {name}: the carried bytes are damaged")
        folder = os.path.join(H, "bundles", f"{kind}-{name}")
        os.makedirs(folder, exist_ok=True)
        with tarfile.open(fileobj=__import__("io").BytesIO(body)) as archive:
            archive.extractall(folder, filter="data")
        say(f"arrived: {kind} {name} ({len(body) / 2**20:.0f} MiB)")
        yield kind, name, folder


def install_runtime(name, folder):
    target = os.path.join(H, "cuda", name)
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--target",
            target,
            *sorted(os.path.join(folder, f) for f in os.listdir(folder)),
        ]
    )
    shutil.rmtree(folder)
    done(f"runtime-{name}")


class Rebuild(threading.Thread):
    """wheel_delta.py unpack against the previous release's raw members, in the background: the
    next release's starts as soon as this one's raw members are expanded (`wait_expanded`), so
    the slow deflates of several releases run at once on the machine's cores."""

    def __init__(self, kind, name, folder, previous, then):
        super().__init__()
        self.kind, self.name, self.folder, self.previous, self.then = (
            kind,
            name,
            folder,
            previous,
            then,
        )
        self.keep = os.path.join(H, "raw", kind, name)
        self.ready = self.keep + ".expanded"
        self.failed = None
        self.start()

    def run(self):
        target = os.path.join(H, "wheels" if self.kind == "torch" else "triton-wheels")
        os.makedirs(target, exist_ok=True)
        env = tool_env()
        env["LD_PRELOAD"] = os.path.join(TOOLS, "lib", "libz.so.1")  # zlib 1.2.13, as packed
        argv = [
            sys.executable,
            os.path.join(HERE, "wheel_delta.py"),
            "unpack",
            self.folder,
            target,
            "--keep",
            self.keep,
            "--ready",
            self.ready,
        ]
        if self.previous:
            argv += ["--previous", os.path.join(H, "raw", self.kind, self.previous)]
        started = time.time()
        try:
            out = subprocess.run(argv, check=True, capture_output=True, text=True, env=env)
            wheel = out.stdout.strip()
            say(
                f"rebuilt {os.path.basename(wheel)} (sha256 as PyPI's) in "
                f"{time.time() - started:.0f} s"
            )
            shutil.rmtree(self.folder)
            self.then(wheel)
        except Exception as exc:  # noqa: BLE001 - said; the releases after it still go on
            stderr = getattr(exc, "stderr", "") or traceback.format_exc()
            self.failed = f"{self.kind} {self.name}: {exc}: {stderr[-1500:]}"
            say(f"REBUILD FAILED {self.failed}")
            done(f"failed-{self.kind}-{self.name}")
        finally:
            open(self.ready, "a").close()  # never leave the next one waiting

    def wait_expanded(self):
        while not os.path.exists(self.ready) and self.is_alive():
            time.sleep(0.5)


def install_triton(name, wheel):
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--target",
            os.path.join(H, "triton", name),
            wheel,
        ]
    )
    done(f"triton-{name}")


def standins(release, wheel):
    if release.runtime == MACHINE:
        return
    out = os.path.join(H, "standins", release.version)
    run(
        [
            sys.executable,
            os.path.join(HERE, "standins.py"),
            wheel,
            out,
            "--cudnn",
            release.cudnn,
            "--provided",
            os.path.join(H, "cuda", release.runtime),
        ]
    )


def _words(path):
    with open(path) as handle:
        return handle.read().split()


def wait_for(key):
    """Until `key` is done (or failed: the probe then says what is missing)."""
    path = os.path.join(H, "done")
    while True:
        said = _words(path) if os.path.exists(path) else []
        if key in said or f"failed-{key}" in said:
            return
        time.sleep(1)


def matrix(release):
    """torchbisect matrix over the entries of the run's matrix file whose wheel is here."""
    if os.environ.get("GPU_RELEASES_NO_MATRIX"):  # rebuild only (another kind's machine)
        done(f"probed-{release.version}")
        return
    for kind, name in (("runtime", release.runtime), ("triton", release.triton)):
        if name not in (MACHINE, NO_TRITON) and (kind == "runtime" or RUN.tritons):
            wait_for(f"{kind}-{name}")
    here = set(_words(os.path.join(H, "done")))
    with open(os.path.join(REPO, "tests", "gpu", RUN.matrix)) as handle:
        template = handle.read()
    text = os.path.expandvars(template.replace("$H", H))
    import yaml  # the machine's PyYAML

    config = yaml.safe_load(text)
    config["stable"] = [
        entry for entry in config["stable"] if f"torch-{entry['versions'][0]}" in here
    ]
    path = os.path.join(H, "now.matrix.yaml")
    with open(path, "w") as handle:
        yaml.safe_dump(config, handle, sort_keys=False)
    env = dict(os.environ)
    env.update(
        PYTHONPATH=os.path.join(REPO, "src") + os.pathsep + os.path.join(H, "site"),
        PYTHONUNBUFFERED="1",
        UV_OFFLINE="1",
        PIP_NO_INDEX="1",
        UV_CACHE_DIR=os.path.join(H, "uv-cache"),
        UV_LINK_MODE="copy",
        PATH=os.path.join(H, "site", "bin") + os.pathsep + env["PATH"],
    )  # uv
    started = time.time()
    log = os.path.join(H, "matrix.log")
    argv = [
        sys.executable,
        "-m",
        "torchbisect",
        "matrix",
        "--backend",
        "venv",
        "--matrix",
        path,
        "--no-report",
        "--store",
        STORE,
        "--out",
        os.path.join(H, "evidence"),
        "--workdir",
        os.path.join(H, "work"),
    ]
    if RUN.kind:  # as the service's probe job runs a kind: checked against runners.yaml first
        argv += [
            "--runners",
            os.path.join(REPO, "runners.yaml"),
            "--kind",
            RUN.kind,
            "--require-gpu",
        ]
    with open(log, "a") as out:
        out.write(f"\n### {release.cell}\n$ {' '.join(argv)}\n")
        out.flush()
        code = subprocess.run(
            argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
        ).returncode
    say(f"matrix with {release.cell}: exit {code} in {time.time() - started:.0f} s")
    for leftover in ("work/venvs", "uv-cache"):  # the disk holds 16 releases only this way
        shutil.rmtree(os.path.join(H, leftover), ignore_errors=True)
    done(f"probed-{release.version}")


def main():
    probes = queue.Queue()

    def prober():
        while True:
            release = probes.get()
            if release is None:
                return
            try:
                matrix(release)
            except Exception:  # noqa: BLE001 - said in the log; the next release goes on
                say(f"matrix for {release.cell} failed:\n{traceback.format_exc()}")
                done(f"probed-{release.version}")

    def then_torch(release):
        def go(wheel):
            standins(release, wheel)
            done(f"torch-{release.version}")
            probes.put(release)

        return go

    def then_triton(name):
        return lambda wheel: install_triton(name, wheel)

    worker = threading.Thread(target=prober)
    worker.start()
    chains = {"torch": [], "triton": []}  # the Rebuilds of each kind, in stream order
    try:
        for kind, name, folder in bundles():
            if kind == "runtime":
                install_runtime(name, folder)
                continue
            chain = chains[kind]
            if chain:
                chain[-1].wait_expanded()  # this one patches on its raw members
            then = then_torch(BY_VERSION[name]) if kind == "torch" else then_triton(name)
            chain.append(Rebuild(kind, name, folder, chain[-1].name if chain else None, then))
            _tidy(chain)
        for chain in chains.values():
            for rebuild in chain:
                rebuild.join()
            _tidy(chain)
    except BaseException:
        say(f"daemon stopped:\n{traceback.format_exc()}")
        raise
    finally:
        probes.put(None)
        worker.join()
        say("daemon: all done")
        done("all")


def _tidy(chain):
    """Raw members nobody needs any more: their own rebuild ended and the next one's expanded."""
    for older, newer in zip(chain, chain[1:], strict=False):
        if not older.is_alive() and os.path.exists(newer.ready):
            shutil.rmtree(older.keep, ignore_errors=True)


def reprobe(version):
    """`reprobe V`: the stand-ins and the matrix for a release that is here, again (after a fix
    to the harness, which `h200_releases.sh sync` copied in)."""
    release = BY_VERSION[version]
    wheel = next(
        os.path.join(H, "wheels", n)
        for n in os.listdir(os.path.join(H, "wheels"))
        if n.startswith(f"torch-{version}-")
    )
    shutil.rmtree(os.path.join(H, "standins", version), ignore_errors=True)
    standins(release, wheel)
    matrix(release)


if __name__ == "__main__":
    if sys.argv[1:2] == ["reprobe"]:
        reprobe(sys.argv[2])
    else:
        main()
