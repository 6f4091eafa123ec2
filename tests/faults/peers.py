"""The hostile peers of the network fault tests: `Peer` (tests/helpers/loopback.py), a server on
127.0.0.1 whose answers the test writes as a function, and `redirect`."""

from helpers.loopback import Answer, Peer, Seen, redirect

__all__ = ["Answer", "Peer", "Seen", "redirect"]
