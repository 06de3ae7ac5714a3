"""Simulated hosts' network: one namespace per host, joined by a bridge inside a hub namespace, so that
no address or route is added to the machine's own namespace and no traffic can leave."""

from __future__ import annotations

import logging
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

NETNS_ETC = Path("/etc/netns")


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@dataclass
class SimNetwork:
    hosts: list[str]
    tag: str = field(default_factory=lambda: secrets.token_hex(2))
    created: list[str] = field(default_factory=list)

    @property
    def subnet(self) -> str:
        # 10.200-254.x.0/24: private, picked per simulation, and only ever present inside the namespaces.
        n = int(self.tag, 16)
        return f"10.{200 + n % 55}.{n // 55 % 256}"

    def namespace(self, host: str) -> str:
        return f"rc{self.tag}-{host}"

    def address(self, host: str) -> str:
        return f"{self.subnet}.{10 + self.hosts.index(host) + 1}"

    @property
    def hub(self) -> str:
        return f"rc{self.tag}-hub"

    def create(self) -> None:
        if shutil.which("ip") is None:
            raise RuntimeError("raycluster sim needs iproute2 (`ip`) and root: apt-get install iproute2")
        ip("netns", "add", self.hub)
        self.created.append(self.hub)
        ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
        ip("-n", self.hub, "link", "set", "br0", "up")
        hosts_file = "127.0.0.1 localhost\n" + "".join(f"{self.address(h)} {h}\n" for h in self.hosts)
        for k, host in enumerate(self.hosts, start=1):
            ns, inner, outer = self.namespace(host), f"rc{self.tag}h{k}", f"rc{self.tag}b{k}"
            ip("netns", "add", ns)
            self.created.append(ns)
            ip("link", "add", inner, "netns", ns, "type", "veth", "peer", "name", outer, "netns", self.hub)
            ip("-n", ns, "link", "set", inner, "name", "eth0")
            ip("-n", ns, "addr", "add", f"{self.address(host)}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", self.hub, "link", "set", outer, "master", "br0")
            ip("-n", self.hub, "link", "set", outer, "up")
            (NETNS_ETC / ns).mkdir(parents=True, exist_ok=True)
            (NETNS_ETC / ns / "hosts").write_text(hosts_file)
        log.info("sim: %d hosts on %s.0/24 (namespaces rc%s-*)", len(self.hosts), self.subnet, self.tag)

    def destroy(self) -> None:
        for ns in reversed(self.created):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
            shutil.rmtree(NETNS_ETC / ns, ignore_errors=True)
        self.created.clear()
