#!/usr/bin/env bash
# Harness (issue 32, item 6): `bisect --find-fix --pytorch-repo` down to the commit on a REAL
# torch — the H200's installed torch 2.11.0+cu130, its binary and its own Python tree.
#
#   bash tests/gpu/h200_commit_bisect.sh pack   # on a development machine (network): the wheels
#                                               # torchbisect needs there, into .gpu-carry/whl/
#   bash tests/gpu/h200_commit_bisect.sh        # on the H200, with carry [".gpu-carry"]; logs
#                                               # and results land in $OUT
#
# What it builds (under /tmp/commit-bisect; nothing outside it is written but $OUT):
#   pytorch/  a git repository whose first commit is the installed torch's own `torch/**.py`
#             (torch/version.py excepted: the build writes it), beside stand-in `setup.py`,
#             `csrc/`, `test/` and `docs/`; then eight commits: Python-only, inert (test/ or
#             docs/ only), one compiled (csrc/), and FIX, a Python-only change of
#             torch/__init__.py that makes `torch._lazy_clone` copy eagerly; and a `nightly`
#             branch made as pytorch/test-infra makes it (`git commit-tree -p <previous nightly>
#             <main sha>^{tree} -m "DATE nightly release (<main sha>)"`).
#   wheels/   two stand-in nightlies 2.12.0.dev20261201 (main = the first commit: affected) and
#             2.12.0.dev20261202 (main = the last commit: fixed): the installed torch's files as
#             they are (the same binary), its Python files as git has them at that commit, a
#             version.py naming the nightly commit.  Installed by the product (venv backend,
#             --overlay: the venv sees the machine's CUDA packages).
# Then, as a user would: `torchbisect bisect --bad 2026-12-01 --good 2026-12-02 --find-fix
# --pytorch-repo pytorch`, with the probe's capture_data_ptr case (when CUDA is there) and with a
# --script that asks torch whether `_lazy_clone` still makes a copy-on-write tensor (anywhere);
# each must name FIX exactly.  Last, one overlay of a real torch venv is made by hand and its
# time and disk measured (the venv's `du` beside the overlay's own, hard links counted once).
#
# Rehearsed on a development machine with GPU_PY=<a venv's python with torch 2.13.0+cpu and
# torchbisect's dependencies>: no CUDA there, so only the --script bisection runs.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

if [ "${1:-}" = pack ]; then
  set -e
  dest="$root/.gpu-carry/whl"
  mkdir -p "$dest"
  env PIP_CONFIG_FILE=/dev/null python3 -m pip download -q --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$dest" \
    docker==7.1.0 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 \
    typing-inspection==0.4.5 typing-extensions==4.16.0 uv==0.13.9
  # git, in case the machine has none: Debian's, which needs only libc, zlib and pcre2
  work=$(mktemp -d)
  (cd "$work" && apt-get download -q git >/dev/null && dpkg -x git_*.deb x)
  tar -C "$work/x" -cf - usr/bin/git usr/lib/git-core usr/share/git-core \
    | xz -9 > "$root/.gpu-carry/git.tar.xz"
  rm -rf "$work"
  ls -la "$dest" "$root/.gpu-carry"
  exit 0
fi

: "${OUT:?set OUT to the folder for logs and results}"
PY=${GPU_PY:-python3}
W=/tmp/commit-bisect
export PYTHONUNBUFFERED=1 PYTHONPATH="$root/src" UV_OFFLINE=1 UV_CACHE_DIR="$W/uv-cache" \
  UV_NO_CONFIG=1 PIP_NO_INDEX=1 GIT_AUTHOR_NAME=harness GIT_AUTHOR_EMAIL=harness@invalid \
  GIT_COMMITTER_NAME=harness GIT_COMMITTER_EMAIL=harness@invalid
LOG="$OUT/commit-bisect.log"
exec > >(tee "$LOG") 2>&1
step() { echo; echo "=== $(date -u +%H:%M:%S) $*"; }
t0=$(date +%s)

step "0. the machine"
if [ -d "$root/.gpu-carry/whl" ] && [ -z "${GPU_PY:-}" ]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile "$root"/.gpu-carry/whl/*.whl \
    || { echo "FAIL: the carried wheels did not install"; exit 1; }
fi
if ! command -v git >/dev/null; then  # the carried Debian git (pack)
  mkdir -p /tmp/commit-bisect-git && tar -C /tmp/commit-bisect-git -xJf "$root/.gpu-carry/git.tar.xz" \
    || { echo "FAIL: no git here and none carried (.gpu-carry/git.tar.xz)"; exit 1; }
  export PATH="/tmp/commit-bisect-git/usr/bin:$PATH" \
    GIT_EXEC_PATH=/tmp/commit-bisect-git/usr/lib/git-core \
    GIT_TEMPLATE_DIR=/tmp/commit-bisect-git/usr/share/git-core/templates
fi
git --version || { echo "FAIL: git does not run"; exit 1; }
command -v nvidia-smi >/dev/null && nvidia-smi -L
"$PY" - <<'PY' || { echo "FAIL: no torch or no torchbisect here"; exit 1; }
import shutil, sys, torch, torchbisect
from torchbisect.backends.venv import uv_binary
print("python", sys.version.split()[0], sys.executable)
print("torch", torch.__version__, "git", torch.version.git_version[:12], "at", torch.__file__)
print("cuda", torch.cuda.is_available() and torch.cuda.get_device_name(0))
print("torchbisect from", torchbisect.__file__, "; uv", uv_binary())
PY
CUDA=$("$PY" -c 'import torch; print(int(torch.cuda.is_available()))')
rm -rf "$W"; mkdir -p "$W"

step "1. the repository: the installed torch's own Python tree, then eight commits"
"$PY" - "$W" <<'PY' || { echo "FAIL: could not build the repository"; exit 1; }
import os, pathlib, shutil, subprocess, sys, torch
w = pathlib.Path(sys.argv[1]); repo = w / "pytorch"
src = pathlib.Path(torch.__file__).parent
def git(*a, **kw):
    return subprocess.run(["git", "-C", str(repo), *a], check=True, capture_output=True,
                          text=True, **kw).stdout.strip()
def commit(subject, files):
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git("add", "-A"); git("commit", "-q", "-m", subject)
    return git("rev-parse", "HEAD")
repo.mkdir(parents=True); git("init", "-q", "-b", "main")
n = 0
for path in src.rglob("*.py"):
    rel = path.relative_to(src.parent)
    if "__pycache__" in rel.parts or rel.as_posix() in ("torch/version.py", "torch/_version.py"):
        continue
    (repo / rel).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(path, repo / rel); n += 1
start = commit(f"torch {torch.__version__}'s own Python tree ({n} files)", {
    "setup.py": "# stand-in: the build\n", "csrc/copy.cpp": "// stand-in: compiled code\n",
    "test/test_lazy_clone.py": "def test(): pass\n", "docs/source/notes.rst": "Notes\n"})
init = (repo / "torch/__init__.py").read_text()
fix = init + ("\n\ndef _lazy_clone(self, *args, **kwargs):  # FIX: a copy now, never a deferred "
              "one\n    return self.clone(*args, **kwargs)\n")
shas = [start]
for subject, files in [
    ("python: a new helper module", {"torch/utils/_harness_a.py": "A = 1\n"}),
    ("inert: a test", {"test/test_harness.py": "def test_a(): pass\n"}),
    ("compiled: the copy kernel", {"csrc/copy.cpp": "// stand-in: compiled code, v2\n"}),
    ("python: another helper module", {"torch/utils/_harness_b.py": "B = 1\n"}),
    ("inert: the docs", {"docs/source/notes.rst": "Notes, revised\n"}),
    ("FIX: torch._lazy_clone copies eagerly", {"torch/__init__.py": fix}),
    ("inert: a test of the fix", {"test/test_lazy_clone.py": "def test(): assert True\n"}),
    ("python: a third helper module", {"torch/utils/_harness_c.py": "C = 1\n"})]:
    shas.append(commit(subject, files))
nightly = ""
for day, main in (("2026-12-01", shas[0]), ("2026-12-02", shas[-1])):
    parents = ["-p", nightly] if nightly else []
    nightly = git("commit-tree", *parents, f"{main}^{{tree}}", "-m",
                  f"{day} nightly release ({main})")
    (w / f"nightly-{day}").write_text(f"{nightly} {main}\n")
git("update-ref", "refs/heads/nightly", nightly)
(w / "fix").write_text(shas[6] + "\n")
print(git("log", "--format=%h %s", "main"))
print("nightly branch:"); print(git("log", "--format=%h %s", "nightly"))
PY

step "2. two stand-in nightlies: the installed binary, git's Python files at each main commit"
"$PY" - "$W" <<'PY' || { echo "FAIL: could not build the stand-in wheels"; exit 1; }
import base64, hashlib, pathlib, re, subprocess, sys, tarfile, io, time, zipfile, torch
w = pathlib.Path(sys.argv[1]); repo = w / "pytorch"; (w / "wheels").mkdir()
src = pathlib.Path(torch.__file__).parent
dist = next(src.parent.glob(f"torch-{torch.__version__.split('+')[0]}*.dist-info"))
tag = next(l.split(": ", 1)[1] for l in (dist / "WHEEL").read_text().splitlines()
           if l.startswith("Tag: "))
local = torch.__version__.partition("+")[2] or "cpu"
major, minor = torch.__version__.split(".")[:2]
for day in ("2026-12-01", "2026-12-02"):
    start = time.monotonic()
    nightly, main = (w / f"nightly-{day}").read_text().split()
    version = f"{major}.{int(minor) + 1}.0.dev{day.replace('-', '')}+{local}"
    tree = subprocess.run(["git", "-C", str(repo), "archive", main, "torch"], check=True,
                          capture_output=True).stdout
    py = {m.name: t.extractfile(m).read() for t in [tarfile.open(fileobj=io.BytesIO(tree))]
          for m in t.getmembers() if m.isfile()}
    text = (src / "version.py").read_text()
    text = re.sub(r"(?m)^__version__ = .*$", f"__version__ = {version!r}", text)
    text = re.sub(r"(?m)^git_version = .*$", f"git_version = {nightly!r}", text)
    py["torch/version.py"] = text.encode()
    name = f"torch-{version}.dist-info"
    path = w / "wheels" / f"torch-{version}-{tag}.whl"
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        def put(arc, data=None, file=None):
            h, size = hashlib.sha256(), 0
            with zf.open(arc, "w", force_zip64=True) as out:
                for chunk in ([data] if data is not None else iter(lambda: file.read(1 << 22), b"")):
                    h.update(chunk); size += len(chunk); out.write(chunk)
            record.append(f"{arc},sha256={base64.urlsafe_b64encode(h.digest()).rstrip(b'=').decode()},{size}")
        for f in sorted(src.rglob("*")):
            rel = f.relative_to(src.parent).as_posix()
            if f.is_dir() or f.is_symlink() or "__pycache__" in rel or rel.endswith(".pyc"):
                continue
            if rel.endswith(".py"):
                if rel in py:
                    put(rel, data=py.pop(rel))
                continue  # not in git at this commit: the commit does not have it
            with f.open("rb") as fh:
                put(rel, file=fh)
        for rel, data in py.items():  # new at this commit
            put(rel, data=data)
        put(f"{name}/METADATA", data=f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n".encode())
        put(f"{name}/WHEEL", data=f"Wheel-Version: 1.0\nGenerator: harness\nRoot-Is-Purelib: false\nTag: {tag}\n".encode())
        if (dist / "entry_points.txt").is_file():  # torchrun & co: console scripts
            put(f"{name}/entry_points.txt", data=(dist / "entry_points.txt").read_bytes())
        zf.writestr(f"{name}/RECORD", "\n".join([*record, f"{name}/RECORD,,"]) + "\n")
    print(f"{path.name}: {path.stat().st_size / 2**20:,.0f} MiB, {len(record)} files, "
          f"{time.monotonic() - start:.1f} s")
(w / "cuda-tag").write_text(local)
PY
TAG=$(cat "$W/cuda-tag")
FIX=$(cat "$W/fix")
echo "expected answer: the first fixed commit is ${FIX:0:12} (FIX)"

common=(--bad 2026-12-01 --good 2026-12-02 --find-fix --cuda "$TAG" --index-url "$W/wheels"
        --backend venv --overlay --pytorch-repo "$W/pytorch" --no-github --workdir "$W/work")
verdict() {  # $1: a bisect --json file; says whether its commit answer is FIX, exactly
  "$PY" - "$1" "$FIX" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1])); c = doc.get("narrowed") or {}
ok = c.get("exact") and c.get("candidates") == [sys.argv[2][:12]]
print(("PASS" if ok else "FAIL") + ": the commit answer is", c.get("candidates"),
      "exact" if c.get("exact") else "not exact", "; nightly answer", doc.get("candidates"))
for p in c.get("points", []):
    print("  ", p.get("commit", "")[:12] or p["date"], p["verdict"], "-", p.get("reason", ""))
print("  commit lines:", *c.get("commits", []), sep="\n    ")
PY
}

if [ "$CUDA" = 1 ]; then
  step "3a. bisect --find-fix --pytorch-repo, judged by the probe's capture_data_ptr case"
  s=$(date +%s)
  "$PY" -m torchbisect bisect "${common[@]}" --case capture_data_ptr \
    --store "$W/probe.sqlite" --json "$OUT/probe-bisect.json"
  echo "exit $? after $(( $(date +%s) - s )) s"
  verdict "$OUT/probe-bisect.json"
else
  step "3a. skipped: no CUDA here, the probe's capture cases cannot judge (a rehearsal)"
fi

if [ "$CUDA" = 1 ] && [ $(( $(date +%s) - t0 )) -gt 170 ]; then
  step "3b. skipped: $(( $(date +%s) - t0 )) s gone, the machine's 5 minutes would not hold it"
else
  step "3b. the same with --script: does torch._lazy_clone still give a copy-on-write tensor?"
  COW="python -c 'import sys, torch; x = torch.ones(8); sys.exit(1 if torch._C._is_cow_tensor(torch._lazy_clone(x)) else 0)'"
  s=$(date +%s)
  "$PY" -m torchbisect bisect "${common[@]}" --script "$COW" --store "$W/script.sqlite" \
    --json "$OUT/script-bisect.json"
  echo "exit $? after $(( $(date +%s) - s )) s"
  verdict "$OUT/script-bisect.json"
fi

step "4. what each commit's overlay cost (stored runs: seconds_install = the overlay made + import torch checked)"
"$PY" - "$W" <<'PY'
import json, pathlib, sqlite3, sys
for name in ("probe.sqlite", "script.sqlite"):
    path = pathlib.Path(sys.argv[1]) / name
    if not path.exists():
        continue
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT cell_id, status, verdict, seconds_install, seconds_probe "
                          "FROM runs ORDER BY id").fetchall()
    print(name)
    for cell, status, verdict, install, probe in rows:
        print(f"  {cell}: {status} {verdict} install {install:.1f} s, probe {probe:.1f} s")
PY

step "5. one overlay of a real torch venv, by hand: time and disk"
"$PY" - "$W" "$OUT" <<'PY'
import json, os, pathlib, subprocess, sys, time
from torchbisect.bisect.gitrange import python_changes
from torchbisect.bisect.overlay import link_tree, overlay_python_files
w = pathlib.Path(sys.argv[1])
venv = next(p for p in sorted((w / "work" / "venvs").glob("nightly-20261202-*")) if p.is_dir())
new = (w / "nightly-2026-12-02").read_text().split()[1]
older = subprocess.run(["git", "-C", str(w / "pytorch"), "rev-parse", "main~4"], check=True,
                       capture_output=True, text=True).stdout.strip()  # "python: another helper"
dest = w / "measure-overlay"
start = time.monotonic(); link_tree(venv, dest); linked = time.monotonic() - start
tree = python_changes(w / "pytorch", new, older)
start = time.monotonic(); overlay_python_files(dest, tree, commit=older); wrote = time.monotonic() - start
du = subprocess.run(["du", "-s", "--block-size=1M", str(venv), str(dest)], capture_output=True,
                    text=True).stdout.split()
files = [p for p in dest.rglob("*") if p.is_file() and not p.is_symlink()]
shared = sum(1 for p in files if p.stat().st_nlink > 1)
print(f"nightly venv {venv.name}: {du[0]} MiB")
print(f"overlay of {older[:12]}: {du[2]} MiB of its own (hard links counted once), "
      f"{len(files)} files, {shared} hard-linked, {len(files) - shared} copied")
print(f"overlay made in {linked:.2f} s, then the commit's files ({len(tree.write)} written, "
      f"{len(tree.delete)} removed) in {wrote:.2f} s")
script = dest / "bin" / "torchrun"
first = script.read_text().splitlines()[0] if script.is_file() else ""
print("bin/torchrun starts:", first or "(no torchrun)")
(pathlib.Path(sys.argv[2]) / "overlay-cost.json").write_text(json.dumps({
    "venv": venv.name, "venv_mib": int(du[0]), "overlay_own_mib": int(du[2]),
    "files": len(files), "hard_linked": shared, "copied": len(files) - shared,
    "seconds_tree": round(linked, 2), "seconds_commit_files": round(wrote, 2),
    "torchrun": first}, indent=1) + "\n")
PY
echo
echo "=== done in $(( $(date +%s) - t0 )) s; results: $(ls "$OUT")"
exec >/dev/null 2>&1  # tee sees the end of its input and writes the log's last lines
sleep 1
