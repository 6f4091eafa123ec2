"""Artifact storage and Pages deploys of github.com, replaced by folders, for the act rehearsal.

upload-artifact, download-artifact and deploy-pages need GitHub's own servers, so under act their
pinned SHAs are mapped (--local-repository) to the composite actions beside this file, which call
this script.  Semantics kept from the real actions (v4 and later): an upload's root is the deepest
folder holding all its paths; a name may be uploaded once per run; a download by name unpacks into
`path`, by pattern into `path/<name>/`; deploy-pages publishes the `github-pages` artifact's tar.
$TORCHBISECT_ACT_ARTIFACTS is the run's artifact folder, $TORCHBISECT_ACT_PAGES the site, and
$TORCHBISECT_ACT_STANDINS this folder (mounted at the same path in the runner containers).
Standalone (stdlib, Python 3.8): it runs on the host and in the stock-runner container.
"""

import fnmatch
import os
import shutil
import sys
import tarfile

STORE = os.environ.get("TORCHBISECT_ACT_ARTIFACTS", "")


def fail(message):
    print("::error::" + message)
    sys.exit(1)


def upload(name, paths_text, if_none, overwrite="false"):
    paths = [os.path.abspath(p.strip()) for p in paths_text.splitlines() if p.strip()]
    found = [p for p in paths if os.path.exists(p)]
    if not found:
        if if_none == "error":
            fail("no files found at " + ", ".join(paths))
        if if_none == "warn":
            print("::warning::no files found at " + ", ".join(paths))
        return
    root = os.path.commonpath(found)
    if len(found) == 1 and os.path.isfile(found[0]):
        root = os.path.dirname(found[0])
    dest = os.path.join(STORE, name)
    if os.path.exists(dest):
        if overwrite != "true":  # as upload-artifact: a second upload of one name is a 409
            fail(f"an artifact named {name} was already uploaded in this run")
        shutil.rmtree(dest)
    for path in found:
        target = os.path.join(dest, os.path.relpath(path, root))
        if os.path.isdir(path):
            shutil.copytree(path, target, dirs_exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(path, target)
    print("uploaded artifact {} ({})".format(name, ", ".join(os.path.relpath(p) for p in found)))


def download(name, pattern, path):
    path = path or "."
    if name:
        source = os.path.join(STORE, name)
        if not os.path.isdir(source):
            fail("Artifact not found for name: " + name)
        shutil.copytree(source, path, dirs_exist_ok=True)
        print(f"downloaded artifact {name} into {path}")
        return
    names = sorted(n for n in os.listdir(STORE) if fnmatch.fnmatch(n, pattern or "*"))
    for each in names:
        shutil.copytree(os.path.join(STORE, each), os.path.join(path, each), dirs_exist_ok=True)
    print(f"downloaded {len(names)} artifacts matching {pattern} into {path}")


def deploy(site_url, name="github-pages"):
    archive = os.path.join(STORE, name, "artifact.tar")
    if not os.path.isfile(archive):
        fail(f"no {name} artifact in this run")
    site = os.environ["TORCHBISECT_ACT_PAGES"]
    shutil.rmtree(site, ignore_errors=True)
    os.makedirs(site)
    with tarfile.open(archive) as tar:
        tar.extractall(site)
    with open(os.environ["GITHUB_OUTPUT"], "a") as out:
        out.write(f"page_url={site_url}\n")
    print(f"deployed {archive} to {site_url}")


if __name__ == "__main__":
    if not STORE:
        fail("TORCHBISECT_ACT_ARTIFACTS is not set: these stand-ins run only in the act rehearsal")
    os.makedirs(STORE, exist_ok=True)
    command, args = sys.argv[1], sys.argv[2:]
    {"upload": upload, "download": download, "deploy": deploy}[command](*args)
