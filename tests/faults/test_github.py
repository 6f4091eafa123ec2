"""The GitHub API: GITHUB_TOKEN is sent when set, 5xx is retried, and a used-up rate limit is one
clear note (with the reset time and what helps), after which GitHub is not asked again."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from torchbisect.bisect.commits import CommitLookup

NIGHTLY, MAIN = "a" * 40, "b" * 40


class _GitHub:
    """Answers from `script` (status, headers) first, then with the nightly commit."""

    def __init__(self, script):
        self.script, self.seen = list(script), []

    def __enter__(self):
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                outer.seen.append(self.headers.get("Authorization"))
                if outer.script:
                    status, headers = outer.script.pop(0)
                    self.send_response(status)
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    return
                body = json.dumps({"commit": {"message": f"2025-08-01 nightly release ({MAIN})"}})
                self.send_response(200)
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_port}/repos/pytorch/pytorch"

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def test_the_token_is_sent_and_server_errors_are_retried(monkeypatch, waits):
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_secret")
    fake = _GitHub([(502, {}), (429, {"Retry-After": "3"})])
    with fake as api:
        found = CommitLookup(api=api, timeout=5).main_sha(NIGHTLY)
    assert found.sha == MAIN
    assert fake.seen == ["Bearer ghs_secret"] * 3
    assert len(waits) == 2 and 2.4 <= waits[1] <= 3.6  # Retry-After 3, jittered


def test_a_used_up_rate_limit_is_said_once_and_clearly(monkeypatch, waits):
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    limited = (403, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1764500400"})
    fake = _GitHub([limited] * 5)
    with fake as api:
        lookup = CommitLookup(api=api, timeout=5)
        first, second = lookup.main_sha(NIGHTLY), lookup.main_sha("c" * 40)
    assert first.sha == "" and "rate limit reached until 11:00 UTC" in first.note
    assert "set GITHUB_TOKEN" in first.note and fake.seen == [None]  # not asked again
    assert second.note == first.note and waits == []
