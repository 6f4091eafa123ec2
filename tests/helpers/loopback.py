"""Small HTTP servers on 127.0.0.1 for the tests: `LoopbackServer` (served from a thread for the
length of a `with`; a subclass gives the handler) and `Peer`, whose answers the test writes as a
function, recording every request it gets.

`Peer(answer)` calls `answer(seen)` for each request (`seen` has `.method`, `.target` — the path,
or the absolute URL a client sends to a proxy —, `.headers` and `.body`) and sends what it
returns: `(status, headers, body)`, where body is bytes or an iterable of bytes sent one piece at
a time (a generator may sleep between pieces, as a slow peer does); status 0 sends the body as
the whole raw answer, status line and headers included.  Used as `http_proxy`, a Peer
plays the whole internet: a client asks it for `http://93.184.216.34/…` and it answers, so a
test can give the client a public first URL without leaving 127.0.0.1.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Seen:
    method: str
    target: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


Answer = tuple[int, dict[str, str], bytes | Iterable[bytes]]


class LoopbackServer:
    """An HTTP server on 127.0.0.1, served from a thread for the length of a `with`; a subclass
    gives the request handler class (`_handler()`)."""

    def __enter__(self):
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError


class Peer(LoopbackServer):
    def __init__(self, answer: Callable[[Seen], Answer]):
        self.answer = answer
        self.seen: list[Seen] = []
        self.sent = 0  # body bytes written, until the client stopped reading

    def _handler(self):
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                seen = Seen(
                    self.command,
                    self.path,
                    dict(self.headers.items()),
                    self.rfile.read(length) if length else b"",
                )
                outer.seen.append(seen)
                status, headers, body = outer.answer(seen)
                if status:  # 0: the body is the raw answer, status line and headers included
                    self._head(status, headers, body)
                pieces = [body] if isinstance(body, bytes) else body
                if self.command == "HEAD":
                    pieces = []
                try:
                    for piece in pieces:
                        self.wfile.write(piece)
                        self.wfile.flush()
                        outer.sent += len(piece)
                except OSError:  # the client hung up: what a bounded client does
                    self.close_connection = True
                if not status:
                    self.close_connection = True

            def _head(self, status: int, headers: dict[str, str], body) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                if "Content-Length" in headers:
                    pass
                elif isinstance(body, bytes):
                    self.send_header("Content-Length", str(len(body)))
                else:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()

            do_GET = do_POST = do_PATCH = do_HEAD = _any  # noqa: N815

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def redirect(location: str, status: int = 302) -> Answer:
    return status, {"Location": location}, b""
