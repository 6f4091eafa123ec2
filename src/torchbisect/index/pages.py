"""What an index page says: `Wheel`, and the readers of PEP 503 HTML, PEP 691 JSON and a folder.

A page that arrived but is not a whole index page raises `Garbled` (fetch.py retries it like a
network error); one listing more than MAX_FILES files raises `PageTooLarge`, counted before the
page is parsed so that a million-file page is refused in well under a second.  Links to anything
but a wheel of the package are left out, and a wheel's name is the decoded end of its URL's path,
read by `packaging.utils.parse_wheel_filename` (version, PEP 427 build tag, tags).  A yanked file
(PEP 592 `data-yanked`, PEP 691 `yanked`) is listed with its reason: pip still installs it for an
`==` pin, so choosing it is the chooser's job (choose.py), and saying so the answer's.
Fetching the pages is fetch.py's.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from urllib.parse import urljoin, urlparse

from packaging.tags import Tag
from packaging.utils import BuildTag, InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from ..errors import IndexUnreachable, ResolveError
from ..net.links import wheel_name

_JSON_TYPES = ("application/vnd.pypi.simple.v1+json", "application/json")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# PEP 503 pages are plain anchors; regular expressions read them ~10x faster than HTMLParser,
# which matters for a 15,000-link page (1,000 nightly dates).
_ANCHOR = re.compile(r"<a\s([^>]*)>", re.IGNORECASE)
_ATTR = re.compile(r"""([\w-]+)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""")
_BASE = re.compile(r"<base\s[^>]*href\s*=\s*[\"']([^\"']+)", re.IGNORECASE)
_YANKED = re.compile(r"(?:^|\s)data-yanked(?:\s|$)", re.IGNORECASE)  # bare: yanked, no reason
_ANCHOR_START = re.compile(rb"<a\s", re.IGNORECASE)
MAX_FILES = 200_000  # 13x the 15,000 files of 1,000 nightly dates with 15 wheels each


class PageMissing(ResolveError):
    """The index has no page for this package (HTTP 404, or no such folder): nothing to list."""


class Garbled(Exception):
    """The page arrived but is not a whole index page; retried like a network error."""


class PageTooLarge(IndexUnreachable):
    """The page lists more files than MAX_FILES; not retried."""


@dataclass(frozen=True, kw_only=True)
class Wheel:
    """One wheel file an index lists, with the parts of its name that resolution looks at."""

    filename: str  # decoded: "torch-2.10.0.dev20250801+cu128-cp312-cp312-manylinux_2_28_x86_64.whl"
    url: str  # absolute URL, or a local path for a folder index
    sha256: str | None  # from the #sha256= fragment or PEP 691 hashes; None when not given
    version: str  # "2.10.0.dev20250801+cu128"
    public_version: str  # "2.10.0.dev20250801"
    local: str  # "cu128", or "" for a wheel without a local version label
    build: BuildTag  # PEP 427 build tag: (3, "") for "torch-2.10.0-3-…whl"; () for none
    tags: frozenset[Tag]  # (interpreter, abi, platform), compressed tag sets expanded
    nightly_date: str | None  # "YYYY-MM-DD" for a nightly (".devYYYYMMDD"), else None
    metadata_sha256: str | None = None  # data-dist-info-metadata / data-core-metadata
    size: int | None = None  # bytes, from a PEP 691 page's `size`; None when the page gives none
    yanked: str | None = None  # PEP 592 / 691: None when not yanked, else the reason ("" if none)

    @classmethod
    def parse(
        cls,
        filename: str,
        url: str,
        *,
        sha256: str | None = None,
        metadata_sha256: str | None = None,
        size: int | None = None,
        yanked: str | None = None,
    ) -> Wheel:
        """Raise InvalidWheelFilename when `filename` is not a wheel name."""
        _, parsed, build, tags = _parse_name(filename)
        version, public, local, nightly = _version_parts(parsed)
        return cls(
            filename=filename,
            url=url,
            sha256=sha256,
            version=version,
            public_version=public,
            local=local,
            build=build,
            tags=tags,
            nightly_date=nightly,
            metadata_sha256=metadata_sha256,
            size=size,
            yanked=yanked,
        )

    @property
    def build_label(self) -> str:
        """The build tag as the file name spells it ("3", "10"), "" for none."""
        return "".join(str(part) for part in self.build)

    @property
    def label(self) -> str:
        """The build, named: "2.10.0+cu130", "2.10.0+cu130 (build 3)" for a re-spin."""
        return self.version + (f" (build {self.build_label})" if self.build else "")

    @cached_property
    def parsed_version(self) -> Version:
        return Version(self.version)


@cache  # a page repeats each file name's parts for nothing: cached per name
def _parse_name(filename: str) -> tuple[str, Version, BuildTag, frozenset[Tag]]:
    """The parts of a wheel's name; a number longer than any wheel name needs (a build tag of
    4,000 digits would become a cell's file names; past 4,300 Python's int() refuses it) makes
    it no wheel name."""
    if _LONG_NUMBER.search(filename):
        raise InvalidWheelFilename(
            f"a number in {filename[:80]!r}… has more than {MAX_DIGITS} digits"
        )
    return parse_wheel_filename(filename)


MAX_DIGITS = 24  # the longest run of digits a wheel name needs: a nightly's date has 8
_LONG_NUMBER = re.compile(rf"\d{{{MAX_DIGITS + 1}}}")


@cache  # a page repeats each version for every Python and platform
def _version_parts(version: Version) -> tuple[str, str, str, str | None]:
    """(version, public version, local label, nightly date) of a parsed version."""
    stamp = str(version.dev or "")
    nightly = f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:]}" if len(stamp) == 8 else None
    return str(version), version.public, version.local or "", nightly


def parse_page(body: bytes, content_type: str, base: str, package: str) -> list[Wheel]:
    json_page = content_type in _JSON_TYPES
    files = body.count(b'"filename"') if json_page else sum(1 for _ in _ANCHOR_START.finditer(body))
    if files > MAX_FILES:
        raise PageTooLarge(
            f"the page {base} lists more than {MAX_FILES:,} files (the bound for an index page)"
        )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise Garbled("the page is not UTF-8 text") from None
    if json_page:
        return _from_json(text, base, package)
    wheels = _from_html(text, base, package)
    if not wheels and package.lower() not in text.lower():  # a proxy's login page, say
        raise Garbled(f"the page is not a simple-index page for {package}")
    return wheels


def _from_html(text: str, base: str, package: str) -> list[Wheel]:
    if re.search(r"<html", text, re.IGNORECASE) and not re.search(
        r"</html\s*>", text, re.IGNORECASE
    ):
        raise Garbled("the HTML page ends before </html>")
    found = _BASE.search(text)
    base = urljoin(base, html.unescape(found[1])) if found else base
    origin = "{0.scheme}://{0.netloc}".format(urlparse(base))
    wheels = []
    for anchor in _ANCHOR.finditer(text):
        attrs = {
            m[1].lower(): html.unescape(m[2] or m[3] or m[4] or "")
            for m in _ATTR.finditer(anchor[1])
        }
        href, _, fragment = attrs.get("href", "").partition("#")
        if not href:
            continue
        url = (
            origin + href
            if href.startswith("/") and not href.startswith("//")
            else urljoin(base, href)
        )
        meta = attrs.get("data-dist-info-metadata") or attrs.get("data-core-metadata") or ""
        wheel = _wheel(
            url,
            package,
            sha256=_hash_value(fragment),
            metadata_sha256=_hash_value(meta),
            yanked=attrs.get("data-yanked", "" if _YANKED.search(anchor[1]) else None),
        )
        if wheel:
            wheels.append(wheel)
    return wheels


def _from_json(text: str, base: str, package: str) -> list[Wheel]:
    try:
        doc = json.loads(text)
        if not str(doc["meta"]["api-version"]).startswith("1."):
            raise Garbled(f"unsupported PEP 691 api-version {doc['meta']['api-version']}")
        if len(doc["files"]) > MAX_FILES:  # a key spelled with escapes escapes the count above
            raise PageTooLarge(
                f"the page {base} lists more than {MAX_FILES:,} files (the bound for an index page)"
            )
        files = [(f["url"], f["filename"], f["hashes"]) for f in doc["files"]]
        metas = [f.get("core-metadata", f.get("dist-info-metadata")) for f in doc["files"]]
        sizes = [f.get("size") for f in doc["files"]]
        yanks = [_json_yanked(f.get("yanked")) for f in doc["files"]]
    except (ValueError, KeyError, TypeError) as err:
        raise Garbled(f"not a PEP 691 JSON page ({err.__class__.__name__}: {err})") from None
    wheels = []
    for (url, filename, hashes), meta, size, yanked in zip(files, metas, sizes, yanks, strict=True):
        wheel = _wheel(
            urljoin(base, url),
            package,
            filename=filename,
            sha256=hashes.get("sha256") if isinstance(hashes, dict) else None,
            metadata_sha256=meta.get("sha256") if isinstance(meta, dict) else None,
            size=size if type(size) is int and size >= 0 else None,
            yanked=yanked,
        )
        if wheel:
            wheels.append(wheel)
    return wheels


def _json_yanked(value: object) -> str | None:
    """PEP 691: `yanked` is false, true, or the reason (a string, meaning yanked)."""
    if value is True:
        return ""
    return value if isinstance(value, str) else None


def _wheel(
    url: str,
    package: str,
    *,
    filename: str | None = None,
    sha256: str | None,
    metadata_sha256: str | None,
    size: int | None = None,
    yanked: str | None = None,
) -> Wheel | None:
    """A Wheel for `package`, or None for other files (sdists, other projects, odd names)."""
    # The name is the decoded end of the URL's *path* (never of a query): the download is saved
    # under it, so anything that could leave the download folder is not a candidate.
    named = wheel_name(url.partition("#")[0])
    if (
        named is None
        or filename not in (None, named)
        or _project(named.split("-", 1)[0]) != _project(package)
    ):
        return None
    filename = named
    try:
        return Wheel.parse(
            filename,
            url,
            sha256=_hex(sha256),
            metadata_sha256=_hex(metadata_sha256),
            size=size,
            yanked=None if yanked is None else _reason(yanked),
        )
    except InvalidWheelFilename:
        return None


@cache
def _project(name: str) -> str:
    return canonicalize_name(name)


def read_folder(folder: Path, package: str) -> list[Wheel]:
    page = folder / canonicalize_name(package)
    for name, kind in (
        ("index.json", "application/vnd.pypi.simple.v1+json"),
        ("index.html", "text/html"),
    ):
        if (page / name).is_file():
            body = (page / name).read_bytes()
            try:
                return parse_page(body, kind, (page / name).resolve().as_uri(), package)
            except (Garbled, PageTooLarge) as err:
                raise IndexUnreachable(
                    f"{page / name} is not a usable index page ({err})"
                ) from None
    if not folder.is_dir():
        raise PageMissing(f"the wheel folder {folder} does not exist")
    files = sorted([*folder.glob("*.whl"), *page.glob("*.whl")])
    wheels = [
        _wheel(str(p.resolve()), package, filename=p.name, sha256=None, metadata_sha256=None)
        for p in files
    ]
    return [w for w in wheels if w]


def _reason(text: str) -> str:
    """A yank's reason as it may be said: printable, one line, at most 200 characters."""
    return " ".join("".join(c for c in text if c.isprintable()).split())[:200]


def _hash_value(text: str) -> str | None:
    """The hex digest from "sha256=<hex>" (a fragment or a metadata attribute)."""
    return text[7:] if text.startswith("sha256=") else None


def _hex(value: str | None) -> str | None:
    if not value:
        return None
    value = value.strip().lower()
    return value if _SHA256.match(value) else None
