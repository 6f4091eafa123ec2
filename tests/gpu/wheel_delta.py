"""Carry PyPI torch wheels to the lent H200 in few bytes, and rebuild them there byte for byte.

Harness, not product (see README.md here). The lent machine has no network, and what travels with
one device call is 64 MiB, so a 0.8 GB wheel costs 14 calls. Most of a wheel is a handful of
large shared libraries that change little from one release to the next (2.4.1's libtorch_cuda.so
is a 10 MB zstd patch on 2.4.0's), so:

  pack    (here)   the wheel becomes a skeleton (the zip without its large members' compressed
                   data) and one zstd blob per large member, made with --patch-from the previous
                   release's same member where there is one;
  unpack  (there)  each blob is expanded (against the same previous member, kept from the last
                   unpack) and deflated again exactly as the wheel was made: Python's zipfile at
                   zlib level 6 (2.7 onwards) or Info-ZIP `zip -9` (2.2 - 2.6, flag bits "max").
                   The rebuilt file must have the sha256 PyPI serves, or unpack fails.

Both sides need zstd and Info-ZIP zip on PATH; the deflate must be zlib 1.2.13's (LD_PRELOAD the
carried libz on the H200, whose zlib is another version).  Stdlib only.
"""

import argparse
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor

BIG = 1 << 20  # members whose compressed data is at least this large travel as zstd blobs


def _data_offset(handle, info):
    handle.seek(info.header_offset)
    header = handle.read(30)
    if header[:4] != b"PK\x03\x04":
        raise SystemExit(f"{info.filename}: no local header at {info.header_offset}")
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    return info.header_offset + 30 + name_len + extra_len


def _method(info):
    if info.flag_bits & 0x8:
        raise SystemExit(f"{info.filename}: a data descriptor (streamed zip) is not supported")
    return "infozip9" if info.flag_bits & 0x6 == 0x2 else "zlib6"


def _key(name):
    """The member's name without the hash auditwheel puts in vendored libraries' names."""
    base = os.path.basename(name)
    stem, dash, rest = base.partition("-")
    if dash and "." in rest and all(c in "0123456789abcdef" for c in rest.split(".")[0]):
        return os.path.dirname(name) + "/" + stem + "." + rest.split(".", 1)[1]
    return name


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 24), b""):
            digest.update(block)
    return digest.hexdigest()


def _blob_name(index):
    return f"m{index:03d}.zst"


def pack(wheel, out, previous, keep):
    """`wheel` into folder `out`; `previous` holds the last release's raw members (or None);
    the raw members of this wheel are written to `keep` for the next release."""
    os.makedirs(out, exist_ok=True)
    os.makedirs(keep, exist_ok=True)
    prev = _raw_index(previous)
    archive = zipfile.ZipFile(wheel)
    members, cuts = [], []
    with open(wheel, "rb") as handle:
        for info in archive.infolist():
            if info.compress_type != zipfile.ZIP_DEFLATED or info.compress_size < BIG:
                continue
            start = _data_offset(handle, info)
            members.append(
                {
                    "name": info.filename,
                    "offset": start,
                    "size": info.compress_size,
                    "file_size": info.file_size,
                    "crc": info.CRC,
                    "method": _method(info),
                    "key": _key(info.filename),
                    "blob": _blob_name(len(members)),
                }
            )
            cuts.append((start, info.compress_size))
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda m: _pack_member(archive, m, prev, out, keep), members))
    _write_skeleton(wheel, cuts, os.path.join(out, "skeleton.zst"))
    manifest = {
        "wheel": os.path.basename(wheel),
        "sha256": _sha256(wheel),
        "bytes": os.path.getsize(wheel),
        "members": members,
    }
    with open(os.path.join(out, "manifest.json"), "w") as handle:
        json.dump(manifest, handle, indent=1)
    with open(os.path.join(keep, "index.json"), "w") as handle:
        json.dump({m["key"]: m["blob"] + ".raw" for m in members}, handle)
    return manifest


def _raw_index(folder):
    if not folder or not os.path.exists(os.path.join(folder, "index.json")):
        return {}
    with open(os.path.join(folder, "index.json")) as handle:
        return {key: os.path.join(folder, raw) for key, raw in json.load(handle).items()}


def _pack_member(archive, member, prev, out, keep):
    raw = os.path.join(keep, member["blob"] + ".raw")
    with archive.open(member["name"]) as source, open(raw, "wb") as target:
        shutil.copyfileobj(source, target, 1 << 24)  # zipfile checks the CRC at the end
    # -3: on a shared 2-core machine -9 took 4 minutes a release; the patches grow a little
    argv = [
        "zstd",
        "-q",
        "-f",
        "-3",
        "--long=31",
        "-T2",
        raw,
        "-o",
        os.path.join(out, member["blob"]),
    ]
    base = prev.get(member["key"])
    if base:
        argv[3:3] = [f"--patch-from={base}"]
        member["patch_of"] = member["key"]
    subprocess.run(argv, check=True)


def _write_skeleton(wheel, cuts, path):
    # -6: the skeleton is mostly small members already deflated; -19 took minutes for 1 % less
    with (
        open(wheel, "rb") as source,
        subprocess.Popen(
            ["zstd", "-q", "-f", "-6", "-T2", "-", "-o", path], stdin=subprocess.PIPE
        ) as zstd,
    ):
        position = 0
        for start, size in cuts:
            zstd.stdin.write(source.read(start - position))
            source.seek(size, os.SEEK_CUR)
            position = start + size
        shutil.copyfileobj(source, zstd.stdin)
        zstd.stdin.close()
    if zstd.returncode:
        raise SystemExit("zstd failed on the skeleton")


def unpack(folder, target, previous, keep, ready=None):
    """Rebuild the wheel described in `folder` as `target` (its folder); check its sha256.
    `ready` is touched once every raw member is expanded: the next release's unpack may start
    (it patches on them) while this one still deflates."""
    with open(os.path.join(folder, "manifest.json")) as handle:
        manifest = json.load(handle)
    prev = _raw_index(previous)
    os.makedirs(keep, exist_ok=True)
    with ThreadPoolExecutor(max_workers=len(manifest["members"]) or 1) as pool:
        list(pool.map(lambda m: _expand(folder, m, prev, keep), manifest["members"]))
        with open(os.path.join(keep, "index.json"), "w") as handle:
            json.dump({m["key"]: m["blob"] + ".raw" for m in manifest["members"]}, handle)
        if ready:
            open(ready, "w").close()
        deflated = list(pool.map(lambda m: _deflated(m, keep), manifest["members"]))
    skeleton = subprocess.run(
        ["zstd", "-q", "-d", "-c", os.path.join(folder, "skeleton.zst")],
        stdout=subprocess.PIPE,
        check=True,
    ).stdout
    path = os.path.join(target, manifest["wheel"])
    with open(path + ".part", "wb") as out:
        position = 0  # in the original wheel
        taken = 0  # in the skeleton
        for member, data in zip(manifest["members"], deflated, strict=True):
            gap = member["offset"] - position
            out.write(skeleton[taken : taken + gap])
            taken += gap
            out.write(data)
            position = member["offset"] + member["size"]
        out.write(skeleton[taken:])
    digest = _sha256(path + ".part")
    if digest != manifest["sha256"]:
        raise SystemExit(
            f"{manifest['wheel']}: rebuilt with sha256 {digest}, PyPI's is {manifest['sha256']}"
        )
    os.replace(path + ".part", path)
    return path


def _expand(folder, member, prev, keep):
    raw = os.path.join(keep, member["blob"] + ".raw")
    argv = [
        "zstd",
        "-q",
        "-f",
        "-d",
        "--long=31",
        "--memory=2048MB",
        os.path.join(folder, member["blob"]),
        "-o",
        raw,
    ]
    if member.get("patch_of"):
        argv[3:3] = [f"--patch-from={prev[member['patch_of']]}"]
    subprocess.run(argv, check=True)


def _deflated(member, keep):
    raw = os.path.join(keep, member["blob"] + ".raw")
    data = _deflate(raw, member["method"])
    with open(raw, "rb") as handle:
        crc = zlib.crc32(handle.read())
    if crc != member["crc"] or len(data) != member["size"]:
        raise SystemExit(
            f"{member['name']}: deflated to {len(data)} bytes (crc {crc:08x}); "
            f"the wheel has {member['size']} (crc {member['crc']:08x})"
        )
    return data


def _deflate(raw, method):
    if method == "zlib6":
        with open(raw, "rb") as handle:
            compressor = zlib.compressobj(6, zlib.DEFLATED, -15, 8)
            return compressor.compress(handle.read()) + compressor.flush()
    with tempfile.TemporaryDirectory(dir=os.path.dirname(raw)) as scratch:
        archive = os.path.join(scratch, "one.zip")
        subprocess.run(["zip", "-q", "-9", "-j", "-X", archive, raw], check=True)
        with zipfile.ZipFile(archive) as one, open(archive, "rb") as handle:
            info = one.infolist()[0]
            handle.seek(_data_offset(handle, info))
            return handle.read(info.compress_size)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("verb", choices=("pack", "unpack"))
    parser.add_argument("source", help="pack: the wheel; unpack: the packed folder")
    parser.add_argument("out", help="pack: the packed folder; unpack: the folder for the wheel")
    parser.add_argument("--previous", help="the previous release's raw members (its --keep)")
    parser.add_argument("--keep", required=True, help="where this release's raw members go")
    parser.add_argument("--ready", help="unpack: a file touched once the raw members are there")
    args = parser.parse_args(argv)
    if args.verb == "pack":
        manifest = pack(args.source, args.out, args.previous, args.keep)
        sizes = sum(os.path.getsize(os.path.join(args.out, n)) for n in os.listdir(args.out))
        print(
            f"{manifest['wheel']}: {manifest['bytes'] / 2**20:.0f} MiB -> {sizes / 2**20:.0f}"
            f" MiB packed ({len(manifest['members'])} large members)"
        )
    else:
        print(unpack(args.source, args.out, args.previous, args.keep, args.ready))
    return 0


if __name__ == "__main__":
    sys.exit(main())
