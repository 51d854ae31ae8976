"""`compose build --engine ray` without `--address` starts a local Ray cluster: every socket it listens on is on
the loopback interface (Ray has no authentication: a cluster on all interfaces lets anyone on the network run
code). Read from /proc (Linux), the listening TCP sockets of this process and every process it started."""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads listening sockets from /proc")


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = {pid}, [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _socket_inodes(pids: set[int]) -> set[str]:
    inodes = set()
    for pid in pids:
        try:
            links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
        except OSError:
            continue
        inodes |= {link[8:-1] for link in links if link.startswith("socket:[")}
    return inodes


def _address(hex_ip: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """/proc/net/tcp{,6}'s local address: 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(hex_ip)
    words = b"".join(struct.pack(">I", w) for w in struct.unpack(f"<{len(raw) // 4}I", raw))
    family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
    return ipaddress.ip_address(socket.inet_ntop(family, words))


def listening(pids: set[int]) -> list[tuple[str, int]]:
    """(address, port) of each listening TCP socket that one of `pids` holds."""
    inodes, found = _socket_inodes(pids), []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:  # 0A: LISTEN
                ip, port = f[1].split(":")
                found.append((_address(ip), int(port, 16)))
    return found


def _loopback(ip) -> bool:
    return ip.is_loopback or bool(getattr(ip, "ipv4_mapped", None) and ip.ipv4_mapped.is_loopback)


def test_local_ray_cluster_listens_on_loopback_only():
    ray = pytest.importorskip("ray", reason="the Ray engine needs the scale extra: pip install structseq[scale]")
    from structseq.compose.engine_ray import RayEngine

    if ray.is_initialized():
        pytest.skip("a Ray cluster is already running in this process")
    switch = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
    before = os.environ.get(switch)
    engine = RayEngine(workers=1)
    try:
        time.sleep(2)  # the runtime-env agent and the first worker start after ray.init returns
        sockets = listening(_descendants(os.getpid()))
        assert sockets, "the local cluster's servers were not found"
        exposed = [f"{ip}:{port}" for ip, port in sockets if not _loopback(ip)]
        assert not exposed, f"the local Ray cluster listens beyond loopback: {exposed}"
        assert str(ray.get_runtime_context().gcs_address).startswith("127.0.0.1:")
    finally:
        engine.close()
    assert os.environ.get(switch) == before  # the loopback switch is not left in the caller's environment
