"""``--only watchdog``: what the hang watchdog costs the loop (``--cluster.hang_timeout_s=0`` against the default
and against the shortest timeout's beats)."""

from __future__ import annotations

from bench.harness import Bench


def run(bench: Bench) -> None:
    """What the hang watchdog costs the loop: its beacon thread beats every 5 s (every 1 s at the shortest
    timeouts); no remote call per step."""
    off = bench.raycluster("watchdog-off", "--cluster.hang_timeout_s=0")
    on = bench.raycluster("watchdog-on")
    eager = bench.raycluster("watchdog-10s", "--cluster.hang_timeout_s=10")
    for name, run in (("default (beat every 5 s)", on), ("timeout 10 s (beat every 1.7 s)", eager)):
        cost = 1 - run["samples_per_s"] / off["samples_per_s"]
        sps = (off["samples_per_s"], run["samples_per_s"])
        bench.rows.append(("watchdog", f"loop samples/s, {name}", *sps, f"{cost:+.1%}", "< 1% slower"))
