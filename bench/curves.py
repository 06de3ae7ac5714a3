"""``--only curves``: what recording the curves costs the loop (``--cluster.track=none`` against the default)."""

from __future__ import annotations

from bench.harness import Bench


def run(bench: Bench) -> None:
    """What recording the curves costs the loop, in its worst case: every step logged."""
    off = bench.raycluster("curves-off", "--cluster.track=none", "--log_freq=1")
    on = bench.raycluster("curves-on", "--log_freq=1")
    cost = 1 - on["samples_per_s"] / off["samples_per_s"]
    sps = (off["samples_per_s"], on["samples_per_s"])
    bench.rows.append(("curves", "loop samples/s, every step logged", *sps, f"{cost:+.1%}", "< 1% slower"))
