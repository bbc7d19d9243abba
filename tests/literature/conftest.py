"""Fixtures: the real PubMedQA records, a loopback E-utilities / Wikipedia test double serving them, the
offline index over the same file — and no network: any connection beyond loopback fails, so a test that
would reach the real NCBI or Wikipedia fails instead of passing by luck."""

from __future__ import annotations

import ipaddress
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from clinrag.literature.offline import PubMedQAIndex
from tests.literature.literature_server import LiteratureServer


class NetworkBlocked(OSError):
    pass


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    real_connect = socket.socket.connect

    def connect(sock: socket.socket, address) -> None:
        if (
            sock.family in (socket.AF_INET, socket.AF_INET6)
            and not ipaddress.ip_address(address[0]).is_loopback
        ):
            raise NetworkBlocked(f"network blocked in the literature tests: {address[0]}")
        real_connect(sock, address)

    real_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        # no name resolution either (it may hang where there is no DNS)
        if isinstance(host, str | bytes) and _name(host) != "localhost" and not _is_loopback_ip(host):
            raise NetworkBlocked(f"network blocked in the literature tests: {_name(host)}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def _name(host: str | bytes) -> str:
    return host.decode() if isinstance(host, bytes) else host


def _is_loopback_ip(host: str | bytes) -> bool:
    try:
        return ipaddress.ip_address(_name(host)).is_loopback
    except ValueError:
        return False


@pytest.fixture(scope="session")
def pubmedqa_path(data_dir: Path) -> Path:
    return data_dir / "pubmedqa" / "test_set.json"


@pytest.fixture(scope="session")
def pubmedqa_records(pubmedqa_path: Path) -> dict[str, dict[str, Any]]:
    return json.loads(pubmedqa_path.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def offline_index(pubmedqa_path: Path) -> PubMedQAIndex:
    return PubMedQAIndex.from_file(pubmedqa_path)


@pytest.fixture
def lit_server(pubmedqa_records: dict[str, dict[str, Any]]):
    server = LiteratureServer(pubmedqa_records)
    yield server
    server.close()
