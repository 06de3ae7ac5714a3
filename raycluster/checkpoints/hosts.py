"""Every host's part store, as the keeper reaches them: which node each is on (to name a host that is gone), which
answer, and what each holds of a checkpoint. Every question to the hosts is asked of all at once, with a deadline,
so a resume at 64 hosts waits for the slowest answer once, never for each host in turn."""

from __future__ import annotations

import ray

PING_TIMEOUT_S = 10.0
"""How long a part store may take to answer before its host counts as gone for a resume."""
ATTACH_TIMEOUT_S = 60.0
"""Every part store's node, asked once while every host is up."""


class HostRoots:
    def __init__(self) -> None:
        self.stores: list = []
        self._node_of: dict = {}

    def attach(self, stores: list) -> None:
        nodes = ray.get([store.node_id.remote() for store in stores], timeout=ATTACH_TIMEOUT_S)
        self.stores, self._node_of = list(stores), dict(zip(stores, nodes, strict=True))

    def delete_everywhere(self, name: str) -> None:
        """Every host's files of ``name`` removed (a shared root: already gone); not waited for."""
        for store in self.stores:
            store.delete.remote(name)

    def host_of(self, store) -> str:
        node = self._node_of.get(store, "")
        address = next((n["NodeManagerAddress"] for n in ray.nodes() if n["NodeID"] == node), "an unknown host")
        return f"{address} (node {node[:12]})"

    def gone(self, holders: set, answered: dict) -> list[str]:
        """Which of ``holders`` do not answer (the host left the cluster, or its part store died), by address.
        ``answered``: what each part store said before in the caller's call (it is not asked again); updated."""
        pings = {holder.node_id.remote(): holder for holder in holders if holder not in answered}
        ready, _ = ray.wait(list(pings), num_returns=len(pings), timeout=PING_TIMEOUT_S) if pings else ([], [])
        for ref, holder in pings.items():
            try:
                answered[holder] = ref in ready and bool(ray.get(ref))
            except Exception:  # its actor or its node died
                answered[holder] = False
        return sorted(self.host_of(holder) for holder in holders if not answered[holder])

    def find(self, name: str, record: dict[str, dict], answered: dict) -> tuple[dict | None, list[str]]:
        """Where each file of ``record`` lies, at its size, on a host that answers (``relpath -> part store``); or
        None and the hosts that did not answer (none: every host answered, and the files are not there).
        ``answered`` as for ``gone``: a part store that did not answer before is not asked again."""
        stores = [store for store in self.stores if answered.get(store, True)]
        asked = {store.local_files.remote(name, record): store for store in stores}
        ready, _ = ray.wait(list(asked), num_returns=len(asked), timeout=PING_TIMEOUT_S) if asked else ([], [])
        holders: dict = {}
        for ref, store in asked.items():
            try:
                held = ray.get(ref) if ref in ready else None
            except Exception:  # its actor or its node died
                held = None
            answered[store] = held is not None
            for relpath in held or {}:
                holders.setdefault(relpath, store)
        if holders.keys() != record.keys():
            return None, sorted(self.host_of(store) for store in self.stores if not answered.get(store))
        return holders, []
