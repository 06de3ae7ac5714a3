"""AWS as the simulated hosts reach it: an endpoint on this machine's loopback (a moto server, say) relayed
to the sim's gateway address inside the hub namespace, as a VPC endpoint would serve the job's hosts. The
machine's own namespace gains no address or route; the relay's socket lives in the hub namespace only."""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import socket
import threading
from urllib.parse import urlsplit

from raycluster.errors import UsageError
from raycluster.sim.network import SimNetwork, ip

log = logging.getLogger(__name__)

CHUNK = 1 << 16
CONNECT_TIMEOUT_S = 10


@contextlib.contextmanager
def in_namespace(name: str):
    """This thread in network namespace ``name`` (setns(2) moves the calling thread only)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(f"/run/netns/{name}", os.O_RDONLY)
        try:
            os.setns(target, os.CLONE_NEWNET)
            yield
        finally:
            os.setns(own, os.CLONE_NEWNET)
            os.close(target)
    finally:
        os.close(own)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(CHUNK):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


class AwsRelay:
    def __init__(self, network: SimNetwork, endpoint: str):
        parts = urlsplit(endpoint)
        try:
            loopback = parts.scheme == "http" and ipaddress.IPv4Address(parts.hostname or "").is_loopback
        except ValueError:
            loopback = False
        if not loopback or not parts.port:
            raise UsageError(f"--aws-endpoint {endpoint!r}: expected http://127.x.x.x:PORT (a server on loopback)")
        self.target = (parts.hostname, parts.port)
        self.network = network
        self.server: socket.socket | None = None

    def start(self) -> str:
        """The URL the hosts reach the endpoint at."""
        gateway = f"{self.network.subnet}.1"
        ip("-n", self.network.hub, "addr", "add", f"{gateway}/24", "dev", "br0")
        with in_namespace(self.network.hub):
            self.server = socket.create_server((gateway, 0))
        threading.Thread(target=self._serve, daemon=True).start()
        url = f"http://{gateway}:{self.server.getsockname()[1]}"
        log.info("sim: AWS at %s:%d is reached from the hosts at %s", *self.target, url)
        return url

    def _serve(self) -> None:
        with contextlib.suppress(OSError):  # the server socket closed: the sim is over
            while True:
                client, _ = self.server.accept()
                threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=CONNECT_TIMEOUT_S)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
        back.start()
        _pump(client, upstream)
        back.join()
        client.close()
        upstream.close()

    def stop(self) -> None:
        if self.server is not None:
            with contextlib.suppress(OSError):  # wakes the accept() that close() alone leaves blocked
                self.server.shutdown(socket.SHUT_RDWR)
            self.server.close()
