"""Wheel indexes: PEP 503 HTML / PEP 691 JSON pages or a folder of wheels, read into `Wheel`s.

This module owns the network side of resolution: one request per page with retries and backoff,
one clear error naming the URL when the index does not answer, and the rule that a partial or
garbled answer is an error — never "this version does not exist".  Choosing which wheel a cell
gets is `resolve`'s job; this module only lists and filters.
"""

from __future__ import annotations

import hashlib
import html
import http.client
import json
import re
import sys
import sysconfig
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from urllib.parse import urljoin, urlparse
from urllib.request import url2pathname

from packaging.utils import InvalidWheelFilename, canonicalize_name
from packaging.version import InvalidVersion, Version

from . import links, retry
from .errors import IndexUnreachable, ResolveError
from .links import wheel_name

PYTORCH_INDEX = "https://download.pytorch.org/whl/"
_ACCEPT = ("application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, "
           "text/html;q=0.1")
_JSON_TYPES = ("application/vnd.pypi.simple.v1+json", "application/json")
_MISSING_STATUS = (403, 404, 410)  # download.pytorch.org answers 403 for a folder that is not there
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# PEP 503 pages are plain anchors; regular expressions read them ~10x faster than HTMLParser,
# which matters for a 15,000-link page (1,000 nightly dates).
_ANCHOR = re.compile(r"<a\s([^>]*)>", re.IGNORECASE)
_ATTR = re.compile(r"""([\w-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""")
_BASE = re.compile(r"<base\s[^>]*href\s*=\s*[\"']([^\"']+)", re.IGNORECASE)
_WHEEL_NAME = re.compile(r"^([^-\s]+)-([^-\s]+)(?:-\d[^-\s]*)?-([^-\s]+)-([^-\s]+)-([^-\s]+)\.whl$")
_ARCHES = ("x86_64", "aarch64", "arm64", "universal2", "ppc64le", "s390x", "i686", "armv7l")
_sleep = time.sleep  # tests replace it to keep retries instant


class PageMissing(ResolveError):
    """The index has no page for this package (HTTP 404, or no such folder): nothing to list."""


class _Garbled(Exception):
    """The page arrived but is not a whole index page; retried like a network error."""


@dataclass(frozen=True, kw_only=True)
class Wheel:
    """One wheel file an index lists, with the parts of its name that resolution looks at."""

    filename: str  # decoded: "torch-2.10.0.dev20250801+cu128-cp312-cp312-manylinux_2_28_x86_64.whl"
    url: str  # absolute URL, or a local path for a folder index
    sha256: str | None  # from the #sha256= fragment or PEP 691 hashes; None when not given
    version: str  # "2.10.0.dev20250801+cu128"
    public_version: str  # "2.10.0.dev20250801"
    local: str  # "cu128", or "" for a wheel without a local version label
    python_tag: str  # "cp312" (may be compressed, e.g. "py2.py3")
    abi_tag: str  # "cp312", "cp313t", "none", "abi3"
    platform_tag: str  # "manylinux_2_28_x86_64", "win_amd64", …
    nightly_date: str | None  # "YYYY-MM-DD" for a nightly (".devYYYYMMDD"), else None
    metadata_sha256: str | None = None  # data-dist-info-metadata / data-core-metadata

    @classmethod
    def parse(cls, filename: str, url: str, *, sha256: str | None = None,
              metadata_sha256: str | None = None) -> Wheel:
        """Raise InvalidWheelFilename when `filename` is not a wheel name."""
        match = _WHEEL_NAME.match(filename)
        parts = _version_parts(match[2]) if match else None
        if parts is None:
            raise InvalidWheelFilename(f"not a wheel file name: {filename!r}")
        version, public, local, nightly = parts
        python_tag, abi_tag, platform_tag = match.groups()[2:]
        return cls(filename=filename, url=url, sha256=sha256, version=version,
                   public_version=public, local=local, python_tag=python_tag, abi_tag=abi_tag,
                   platform_tag=platform_tag, nightly_date=nightly,
                   metadata_sha256=metadata_sha256)

    @cached_property
    def tags(self) -> frozenset[tuple[str, str, str]]:
        """(interpreter, abi, platform) triples, compressed tag sets expanded."""
        return frozenset((i, a, p) for i in self.python_tag.split(".")
                         for a in self.abi_tag.split(".") for p in self.platform_tag.split("."))

    @cached_property
    def parsed_version(self) -> Version:
        return Version(self.version)


def default_index(channel: str, cuda: str) -> str:
    """PyTorch's index for a channel and CUDA tag; the package page is `<index>torch/`."""
    channel = getattr(channel, "value", channel)
    prefix = {"stable": "", "test": "test/", "nightly": "nightly/"}.get(channel)
    if prefix is None:
        raise ValueError(f"channel {channel!r} has no PyTorch index")
    return f"{PYTORCH_INDEX}{prefix}{cuda}/"


def fetch_wheels(index_url: str, package: str = "torch", *, retries: int = 4,
                 backoff: float = 0.5, timeout: float = 60.0) -> list[Wheel]:
    """Every wheel of `package` that the index lists, in page order.

    `index_url` is a simple-index root (`…/whl/cu130/`), a `file://` URL or a local folder — either
    a static simple index (`<folder>/<package>/index.html`) or a flat folder of wheels.
    Raises PageMissing when the index has no page for the package, IndexUnreachable when it does
    not answer (or answers garbage) `retries` more times.
    """
    folder = local_path(index_url)
    if folder is not None:
        return _read_folder(folder, package)
    page = index_url.rstrip("/") + "/" + canonicalize_name(package) + "/"
    last, told = "", None
    for attempt in range(retries + 1):
        if attempt:  # a 429/503's Retry-After when given (capped), else backoff; jittered
            delay = retry.wait_before(attempt, retry_after=told, base=backoff, max_wait=60.0)
            # No silent waits: a run that stalls on an unreachable index says so, and until when.
            print(f"note: {page} did not answer ({last}); try {attempt + 1} of {retries + 1} "
                  f"in {delay:.1f} s", file=sys.stderr, flush=True)
            _sleep(delay)
        try:
            body, content_type, final_url = _get(page, timeout)
            return _parse(body, content_type, final_url, package)
        except (OSError, http.client.HTTPException, _Garbled) as err:
            last = _describe(err)
            told = err.headers.get("Retry-After") if isinstance(
                err, urllib.error.HTTPError) and err.headers else None
    raise IndexUnreachable(f"the wheel index {page} did not give a usable answer after "
                           f"{retries + 1} attempts ({last}); check the network")


def reachable(wheels: Iterable[Wheel], index_url: str, *, allow: Collection[str] = (),
              note: Callable[[str], None] | None = None) -> tuple[Wheel, ...]:
    """The wheels whose link an index at `index_url` may send a cell to (see `links.allowed`)."""
    kept, refused = [], []
    for wheel in wheels:
        (kept if links.allowed(wheel.url, index_url, allow) else refused).append(wheel)
    if refused and note:
        note(f"ignored {len(refused)} link(s): {links.refusal(refused[0].url, index_url)}")
    return tuple(kept)


def compatible(wheels: list[Wheel], *, python: str, platform: str | None = None) -> list[Wheel]:
    """The wheels that install on `python` ("3.12", "3.13t", "cp312") and `platform`.

    `platform` is a wheel platform tag or a family ("linux_x86_64", "linux_aarch64", "win_amd64",
    "macosx_arm64"); None means this machine.  manylinux glibc versions are not compared.
    """
    family = platform_family(platform or host_platform())
    accepted = _accepted_pairs(python)
    return [w for w in wheels if any(
        (i, a) in accepted and platform_family(p) in (family, "any") for i, a, p in w.tags)]


def sha256_of(url_or_path: str, *, retries: int = 4, backoff: float = 0.5) -> str:
    """The sha256 of a wheel, streamed from its URL (with retries) or read from disk."""
    path = local_path(url_or_path)
    if path is not None:
        try:
            with path.open("rb") as fh:
                return _digest(fh)
        except OSError as err:
            raise ResolveError(f"cannot read the wheel {path}: {err.strerror}") from None
    digest, last, told = _Resumable(), "", None
    for attempt in range(retries + 1):
        if attempt:  # a dropped connection goes on from the byte it stopped at (Range)
            _sleep(retry.wait_before(attempt, retry_after=told, base=backoff, max_wait=60.0))
        try:
            return digest.fetch(url_or_path)
        except urllib.error.HTTPError as err:
            if err.code in _MISSING_STATUS:
                raise PageMissing(f"{url_or_path} does not exist (HTTP {err.code})") from None
            last, told = _describe(err), err.headers.get("Retry-After") if err.headers else None
        except (OSError, http.client.HTTPException) as err:
            last, told = _describe(err), None
    raise IndexUnreachable(f"could not download {url_or_path} after {retries + 1} attempts "
                           f"({last})")


class _Resumable:
    """A sha256 fed by one download over several connections, each asking for the rest."""

    def __init__(self) -> None:
        self.digest, self.have = hashlib.sha256(), 0

    def fetch(self, url: str) -> str:
        headers = {"User-Agent": _agent(), "Accept-Encoding": "identity"}
        if self.have:
            headers["Range"] = f"bytes={self.have}-"
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                    timeout=60) as resp:
            if self.have and resp.status != 206:  # the range was ignored: start again
                self.digest, self.have = hashlib.sha256(), 0
            length = resp.headers.get("Content-Length")
            expected = self.have + int(length) if (length or "").isdigit() else None
            for chunk in iter(lambda: resp.read(1 << 20), b""):
                self.digest.update(chunk)
                self.have += len(chunk)
        if expected is not None and self.have < expected:
            raise http.client.IncompleteRead(b"", expected - self.have)
        return self.digest.hexdigest()


def python_tag(python: str) -> str:
    """"3.12" → "cp312", "3.13t" → "cp313t"; a tag is returned as is."""
    if python.startswith("cp"):
        return python
    major, _, minor = python.partition(".")
    return f"cp{major}{minor}"


@cache
def platform_family(tag: str) -> str:
    """"manylinux_2_28_x86_64" → "linux_x86_64"; "macosx_11_0_arm64" → "macosx_arm64"."""
    tag = tag.replace("-", "_").replace(".", "_")
    if tag == "any":
        return "any"
    kind = next((k for k in ("musllinux", "linux", "macosx") if k in tag), None)
    arch = next((a for a in _ARCHES if tag.endswith(a)), None)
    return f"{kind}_{arch}" if kind and arch else tag


def host_platform() -> str:
    return platform_family(sysconfig.get_platform())


def local_path(url: str) -> Path | None:
    """The folder or file a `file://` URL or plain path names; None for http(s)."""
    if url.startswith("file://"):
        return Path(url2pathname(urlparse(url).path))
    if "://" in url:
        return None
    return Path(url).expanduser()


def _accepted_pairs(python: str) -> set[tuple[str, str]]:
    tag = python_tag(python)
    free_threaded = tag.endswith("t")
    digits = tag[2:].rstrip("t")
    major, minor = digits[0], int(digits[1:] or 0)
    pairs = {(f"cp{digits}", tag), (f"py{digits}", "none"), (f"py{major}", "none")}
    if not free_threaded:  # neither the stable ABI nor "cpXY-none" builds load there
        pairs |= {(f"cp{digits}", "none")}
        pairs |= {(f"cp{major}{m}", "abi3") for m in range(2, minor + 1)}
    return pairs


@cache  # a page repeats each version for every Python and platform
def _version_parts(text: str) -> tuple[str, str, str, str | None] | None:
    """(version, public version, local label, nightly date) of a version string; None if invalid."""
    try:
        version = Version(text)
    except InvalidVersion:
        return None
    stamp = str(version.dev or "")
    nightly = f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:]}" if len(stamp) == 8 else None
    return str(version), version.public, version.local or "", nightly


def _get(url: str, timeout: float) -> tuple[bytes, str, str]:
    request = urllib.request.Request(url, headers={"Accept": _ACCEPT, "User-Agent": _agent()})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.read(), resp.headers.get_content_type(), resp.geturl()
    except urllib.error.HTTPError as err:
        if err.code in _MISSING_STATUS:
            raise PageMissing(f"the wheel index has no page {url} (HTTP {err.code}): check the "
                              "CUDA tag and `indexes` in matrix.yaml") from None
        if err.code < 500 and err.code != 429:
            raise IndexUnreachable(f"the wheel index {url} refused the request (HTTP {err.code} "
                                   f"{err.reason}); check `indexes` in matrix.yaml") from None
        raise


def _parse(body: bytes, content_type: str, base: str, package: str) -> list[Wheel]:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise _Garbled("the page is not UTF-8 text") from None
    if content_type in _JSON_TYPES:
        return _from_json(text, base, package)
    wheels = _from_html(text, base, package)
    if not wheels and package.lower() not in text.lower():  # a proxy's login page, say
        raise _Garbled(f"the page is not a simple-index page for {package}")
    return wheels


def _from_html(text: str, base: str, package: str) -> list[Wheel]:
    if re.search(r"<html", text, re.IGNORECASE) and not re.search(r"</html\s*>", text,
                                                                   re.IGNORECASE):
        raise _Garbled("the HTML page ends before </html>")
    found = _BASE.search(text)
    base = urljoin(base, html.unescape(found[1])) if found else base
    origin = "{0.scheme}://{0.netloc}".format(urlparse(base))
    wheels = []
    for anchor in _ANCHOR.finditer(text):
        attrs = {m[1].lower(): html.unescape(m[2] or m[3] or m[4] or "")
                 for m in _ATTR.finditer(anchor[1])}
        href, _, fragment = attrs.get("href", "").partition("#")
        if not href:
            continue
        url = origin + href if href.startswith("/") and not href.startswith("//") else \
            urljoin(base, href)
        meta = attrs.get("data-dist-info-metadata") or attrs.get("data-core-metadata") or ""
        wheel = _wheel(url, package, sha256=_hash_value(fragment),
                       metadata_sha256=_hash_value(meta))
        if wheel:
            wheels.append(wheel)
    return wheels


def _from_json(text: str, base: str, package: str) -> list[Wheel]:
    try:
        doc = json.loads(text)
        if not str(doc["meta"]["api-version"]).startswith("1."):
            raise _Garbled(f"unsupported PEP 691 api-version {doc['meta']['api-version']}")
        files = [(f["url"], f["filename"], f["hashes"]) for f in doc["files"]]
        metas = [f.get("core-metadata", f.get("dist-info-metadata")) for f in doc["files"]]
    except (ValueError, KeyError, TypeError) as err:
        raise _Garbled(f"not a PEP 691 JSON page ({err.__class__.__name__}: {err})") from None
    wheels = []
    for (url, filename, hashes), meta in zip(files, metas, strict=True):
        wheel = _wheel(urljoin(base, url), package, filename=filename,
                       sha256=hashes.get("sha256") if isinstance(hashes, dict) else None,
                       metadata_sha256=meta.get("sha256") if isinstance(meta, dict) else None)
        if wheel:
            wheels.append(wheel)
    return wheels


def _wheel(url: str, package: str, *, filename: str | None = None, sha256: str | None,
           metadata_sha256: str | None) -> Wheel | None:
    """A Wheel for `package`, or None for other files (sdists, other projects, odd names)."""
    # The name is the decoded end of the URL's *path* (never of a query): the download is saved
    # under it, so anything that could leave the download folder is not a candidate.
    named = wheel_name(url.partition("#")[0])
    if named is None or filename not in (None, named) \
            or _project(named.split("-", 1)[0]) != _project(package):
        return None
    filename = named
    try:
        return Wheel.parse(filename, url, sha256=_hex(sha256),
                           metadata_sha256=_hex(metadata_sha256))
    except InvalidWheelFilename:
        return None


@cache
def _project(name: str) -> str:
    return canonicalize_name(name)


def _read_folder(folder: Path, package: str) -> list[Wheel]:
    page = folder / canonicalize_name(package)
    for name, kind in (("index.json", "application/vnd.pypi.simple.v1+json"),
                       ("index.html", "text/html")):
        if (page / name).is_file():
            body = (page / name).read_bytes()
            try:
                return _parse(body, kind, (page / name).resolve().as_uri(), package)
            except _Garbled as err:
                raise IndexUnreachable(f"{page / name} is not a usable index page ({err})") \
                    from None
    if not folder.is_dir():
        raise PageMissing(f"the wheel folder {folder} does not exist")
    files = sorted([*folder.glob("*.whl"), *page.glob("*.whl")])
    wheels = [_wheel(str(p.resolve()), package, filename=p.name, sha256=None,
                     metadata_sha256=None) for p in files]
    return [w for w in wheels if w]


def _hash_value(text: str) -> str | None:
    """The hex digest from "sha256=<hex>" (a fragment or a metadata attribute)."""
    return text[7:] if text.startswith("sha256=") else None


def _hex(value: str | None) -> str | None:
    if not value:
        return None
    value = value.strip().lower()
    return value if _SHA256.match(value) else None


def _digest(stream) -> str:
    digest = hashlib.sha256()
    for chunk in iter(lambda: stream.read(1 << 20), b""):
        digest.update(chunk)
    return digest.hexdigest()


def _describe(err: BaseException) -> str:
    if isinstance(err, urllib.error.HTTPError):
        return f"HTTP {err.code} {err.reason}"
    if isinstance(err, urllib.error.URLError):
        return str(err.reason)
    return str(err) or err.__class__.__name__


def _agent() -> str:
    from . import __version__

    return f"torchbisect/{__version__}"
