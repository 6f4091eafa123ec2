"""torchbisect.net over TLS: the bounded sockets carry HTTPS (pooled connections reused), an
untrusted certificate is one phrase and is not retried, and the total deadline holds on a TLS
peer that trickles its answer.  A real TLS server on 127.0.0.1 with a certificate made here."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from torchbisect.net import Deadlines, NetError, request

BODY = b"x" * 3_000_000


@pytest.fixture
def tls(tmp_path, monkeypatch):
    """(the server's https URL, its certificate file); SSL_CERT_FILE is left to the test."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )
    served = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):  # noqa: N802 - the stdlib's name
            served.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()
            if self.path == "/slow":
                for _ in range(40):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.1)
                return
            self.wfile.write(BODY)

        def log_message(self, *args):
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request, client_address):
            pass  # a client that hung up mid-answer is what these tests make

    server = Server(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    ).start()
    for name in ("https_proxy", "HTTPS_PROXY", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)
    yield f"https://localhost:{server.server_address[1]}", cert, served
    server.shutdown()
    server.server_close()


def test_https_goes_through_the_bounded_sockets(tls, monkeypatch):
    url, cert, served = tls
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    for _ in range(3):  # the second and third reuse the pooled connection
        with request("GET", f"{url}/wheel") as answer:
            assert answer.read(10**7, "the wheel") == BODY
    assert served == ["/wheel"] * 3


def test_an_untrusted_certificate_is_one_phrase_and_will_not_heal(tls, monkeypatch, tmp_path):
    url, _, served = tls
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "no-such-bundle.pem"))
    with (
        pytest.raises(NetError, match="TLS with localhost failed") as err,
        request("GET", f"{url}/wheel"),
    ):
        pass
    assert not err.value.transient and served == []


@pytest.mark.slow  # the deadline is waited out
def test_a_tls_peer_trickling_its_body_meets_the_total_deadline(tls, monkeypatch):
    url, cert, _ = tls
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    quick = Deadlines(connect=5, idle=2, total=1)
    with (
        pytest.raises(NetError, match=r"within 1 s \(the total deadline\)") as err,
        request("GET", f"{url}/slow", deadlines=quick) as answer,
    ):
        answer.read(10**7, "the answer")
    assert not err.value.transient
