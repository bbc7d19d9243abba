"""Loopback ports for the tests."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now (bound, then released): for a server a test starts,
    or as a closed port that a client must fail to reach."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
