"""The all-reduce probe: NCCL's log lines read right. The gloo path runs for real across two simulated hosts, as
the preflight of the launched job in ``test_launch.py``."""

import pytest

from raycluster.probe import bus_bandwidth, nccl_transport

# Recorded from NCCL_DEBUG=INFO runs (aws-ofi-nccl on p4d/p5; plain sockets without EFA).
EFA_LOG = [
    "algo-1:312:312 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
    "algo-1:312:312 [0] NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.13.2-aws",
    "algo-1:312:312 [0] NCCL INFO NET/OFI Using Libfabric version 1.22",
    "algo-1:312:312 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct (found 32 nics)",
    "algo-1:312:312 [0] NCCL INFO Using network Libfabric",
]
SOCKET_LOG = [
    "algo-1:88:88 [0] NCCL INFO NET/IB : No device found.",
    "algo-1:88:88 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.1.23<0>",
    "algo-1:88:88 [0] NCCL INFO Using network Socket",
]


def test_efa_and_socket_fallback_are_told_apart():
    efa = nccl_transport(EFA_LOG)
    assert efa.name == "efa" and "Selected provider is efa" in efa.evidence and not efa.fell_back_to_sockets
    socket = nccl_transport(SOCKET_LOG)
    assert socket.name == "socket" and socket.fell_back_to_sockets
    assert nccl_transport(["NCCL INFO NET/OFI Selected provider is tcp"]).name == "tcp"
    assert nccl_transport([]).name == "unknown"


def test_bus_bandwidth_follows_nccl_tests():
    algbw, busbw = bus_bandwidth(1_000_000_000, 1.0, 8)
    assert algbw == 1.0 and busbw == pytest.approx(1.75)
