"""A stand-in for the parts of github.com the workflows reach, on 127.0.0.1, recording requests.

- `/api/…`: the REST calls of `torchbisect notify` (list, open and update issues, comment), kept in
  memory; every request is recorded in `.requests` with its method, path, JSON body and whether a
  bearer token came with it.
- `/<owner>/<repo>/…`: git's smart HTTP protocol through `git http-backend`, so the real
  actions/checkout code fetches the commit under test as it would from github.com.
- `/pages/…`: the published Pages site, a folder the deploy-pages stand-in extracts into.

Faults, to rehearse what breaks: `fail(prefix, status, times)` answers the next `times` requests
whose path starts with `prefix` with `status` (e.g. a 502 from the API, a 503 from the site);
each one so answered is recorded in `.faulted`.  `after_get(rel, n, change)` calls `change` on
the site's file `rel` once its n-th GET has been answered: another run's deploy landing at that
moment, between two steps of the run under test.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass
class Recorded:
    method: str
    path: str
    body: Any
    token: bool


@dataclass
class GitHubStandIn:
    git_root: Path  # holds <owner>/<repo> bare repositories
    pages: Path  # the published site
    url: str = ""
    requests: list[Recorded] = field(default_factory=list)
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    comments: list[tuple[int, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    faults: list[list[Any]] = field(default_factory=list)  # [prefix, status, times left]
    faulted: list[tuple[int, str]] = field(default_factory=list)
    changes: list[list[Any]] = field(default_factory=list)  # [rel, GETs left, change]

    def fail(self, prefix: str, status: int, times: int = 1) -> None:
        with self.lock:
            self.faults.append([prefix, status, times])

    def _fault(self, path: str) -> int | None:
        with self.lock:
            for fault in self.faults:
                if path.startswith(fault[0]) and fault[2] > 0:
                    fault[2] -= 1
                    self.faulted.append((fault[1], path))
                    return fault[1]
        return None

    def after_get(self, rel: str, n: int, change: Callable[[Path], None]) -> None:
        with self.lock:
            self.changes.append([rel, n, change])

    def _answered(self, rel: str) -> None:
        with self.lock:
            due = [c for c in self.changes if c[0] == rel and c[1] > 0]
            for c in due:
                c[1] -= 1
            due = [c for c in due if c[1] == 0]
        for _, _, change in due:
            change(self.pages / rel)

    def api_calls(self, method: str | None = None) -> list[Recorded]:
        return [r for r in self.requests if method in (None, r.method)]


_ISSUES = re.compile(r"^/api/repos/[^/]+/[^/]+/issues(?:/(\d+))?(/comments)?(?:\?.*)?$")


def _handler(hub: GitHubStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet: the test prints what matters
            pass

        def do_GET(self):
            if self._faulted():
                return None
            if self.path.startswith("/api/"):
                return self._api()
            if self.path.startswith("/pages/"):
                return self._page()
            return self._git()

        def _faulted(self) -> bool:
            status = hub._fault(self.path)
            if status is None:
                return False
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._json(status, {"message": f"stand-in fault {status}"})
            return True

        def do_POST(self):
            if self._faulted():
                return None
            return self._api() if self.path.startswith("/api/") else self._git()

        def do_PATCH(self):
            if self._faulted():
                return None
            return self._api()

        def _json(self, code: int, doc: Any) -> None:
            data = json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _api(self):
            size = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(size)) if size else None
            token = self.headers.get("Authorization", "").startswith("Bearer ")
            with hub.lock:
                hub.requests.append(Recorded(self.command, self.path, body, token))
                match = _ISSUES.match(self.path)
                if not token:
                    return self._json(401, {"message": "Requires authentication"})
                if match is None:
                    return self._json(404, {"message": "Not Found"})
                number, comments = match.group(1), match.group(2)
                if self.command == "GET" and number is None:
                    return self._json(
                        200, [dict(i) for i in hub.issues.values() if i["state"] == "open"]
                    )
                if self.command == "POST" and number is None:
                    new = len(hub.issues) + 1
                    hub.issues[new] = {"number": new, "state": "open", **body}
                    return self._json(201, hub.issues[new])
                if number is None or int(number) not in hub.issues:
                    return self._json(404, {"message": "Not Found"})
                if self.command == "POST" and comments:
                    hub.comments.append((int(number), body["body"]))
                    return self._json(201, {"body": body["body"]})
                if self.command == "PATCH":
                    hub.issues[int(number)].update(body)
                    return self._json(200, hub.issues[int(number)])
                return self._json(405, {"message": "Method Not Allowed"})

        def _page(self):
            rel = self.path.split("?", 1)[0][len("/pages/") :] or "index.html"
            path = (hub.pages / rel).resolve()
            if not path.is_relative_to(hub.pages.resolve()) or not path.is_file():
                return self._json(404, {"message": "Not Found"})
            data = path.read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            hub._answered(rel)

        def _git(self):
            path, _, query = self.path.partition("?")
            size = int(self.headers.get("Content-Length") or 0)
            env = {
                "GIT_PROJECT_ROOT": str(hub.git_root),
                "GIT_HTTP_EXPORT_ALL": "1",
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "REQUEST_METHOD": self.command,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(size),
                "REMOTE_ADDR": "127.0.0.1",
                "PATH": "/usr/bin:/bin",
                "HTTP_GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
            }
            done = subprocess.run(
                ["git", "http-backend"],
                input=self.rfile.read(size),
                env=env,
                capture_output=True,
                check=False,
            )
            head, _, data = done.stdout.partition(b"\r\n\r\n")
            headers = [h.split(":", 1) for h in head.decode().split("\r\n") if ":" in h]
            status = next((v.strip() for k, v in headers if k.lower() == "status"), "200 OK")
            self.send_response(int(status.split()[0]))
            for key, value in headers:
                if key.lower() != "status":
                    self.send_header(key, value.strip())
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@contextmanager
def github_standin(git_root: Path, pages: Path) -> Iterator[GitHubStandIn]:
    hub = GitHubStandIn(git_root=git_root, pages=pages)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
