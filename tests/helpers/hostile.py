"""A hostile (or merely unreliable) wheel server on 127.0.0.1 for the fault-injection tests.

`HostileServer(files)` serves `files` (URL path → bytes, or → str for an HTML page).  Before
answering normally it works through `script`, one step per request (a page takes only "status"):
  ("status", 429, {"Retry-After": "1"})   answer with that status and headers
  ("drop", 1000)                           send the headers for the whole file, then only the
                                           first 1000 bytes, and close the connection
Every request's path and `Range` header are recorded in `.requests`.  Range requests are honoured
(206 with Content-Range) unless `ignore_range` is set.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler

from helpers.loopback import LoopbackServer


class HostileServer(LoopbackServer):
    def __init__(self, files: dict[str, bytes | str], *, script=(), ignore_range: bool = False):
        self.files = files
        self.script = list(script)
        self.ignore_range = ignore_range
        self.requests: list[tuple[str, str | None]] = []
        self._lock = threading.Lock()

    def _next_step(self):
        with self._lock:
            return self.script.pop(0) if self.script else ("ok",)

    def _handler(self):
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802
                path = self.path.split("?", 1)[0]
                outer.requests.append((self.path, self.headers.get("Range")))
                body = outer.files.get(path)
                if body is None:
                    self.send_error(404)
                    return
                step = outer._next_step()
                if step[0] == "status":
                    self._answer(step[1], b"busy\n", step[2] if len(step) > 2 else {})
                    return
                if isinstance(body, str):
                    self._answer(200, body.encode(), {"Content-Type": "text/html"})
                    return
                start = self._range_start()
                headers = {"Content-Type": "application/octet-stream"}
                status = 200
                if start:
                    status = 206
                    headers["Content-Range"] = f"bytes {start}-{len(body) - 1}/{len(body)}"
                part = body[start:]
                if step[0] == "drop":
                    self._answer(status, part[: step[1]], headers, length=len(part))
                    self.close_connection = True
                    return
                self._answer(status, part, headers)

            def _range_start(self) -> int:
                spec = self.headers.get("Range") or ""
                if outer.ignore_range or not spec.startswith("bytes="):
                    return 0
                return int(spec[6:].split("-", 1)[0] or 0)

            def _answer(
                self, status: int, body: bytes, headers: dict, *, length: int | None = None
            ) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body) if length is None else length))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def page(links: list[str]) -> str:
    """A PEP 503 page listing `links` as they are written (hrefs are not escaped)."""
    anchors = "\n".join(f'<a href="{href}">{href.rsplit("/", 1)[-1]}</a><br/>' for href in links)
    return f"<!DOCTYPE html>\n<html><body><h1>Links for torch</h1>\n{anchors}\n</body></html>\n"
