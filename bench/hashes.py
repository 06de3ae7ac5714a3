"""``make bench ARGS="--only hashes"``: what checking a checkpoint costs a host's CPU. Every part a host stages
is hashed once, and every file a resume fetches is hashed again; at SHA-256's pace a 40 GB part (π₀ with its
optimizer state) costs a core about half a minute per checkpoint, enough to make staging slower than the save
interval. Each checksum a record may name (``raycluster.checkpoints.manifest.DIGESTS``) hashes the same bytes,
in the chunks a file is read in, on one core."""

from __future__ import annotations

import os
import time

from raycluster.checkpoints.manifest import CHUNK_BYTES, DIGESTS, WRITTEN

TOTAL_MB = 512
"""Bytes hashed per pass: far more than any CPU cache holds, so each pass reads memory as a file's pages do."""


def gb_per_s(algorithm: str, chunks: list[memoryview]) -> float:
    """The best of three passes (another process may share the core during one)."""
    best = float("inf")
    for _ in range(3):
        digest, started = DIGESTS[algorithm](), time.perf_counter()
        for chunk in chunks:
            digest.update(chunk)
        digest.hexdigest()
        best = min(best, time.perf_counter() - started)
    return sum(len(chunk) for chunk in chunks) / best / 1e9


def rows() -> list[tuple[str, str, float, float, str, str]]:
    data = memoryview(os.urandom(TOTAL_MB * 1024**2))
    chunks = [data[start : start + CHUNK_BYTES] for start in range(0, len(data), CHUNK_BYTES)]
    pace = {algorithm: gb_per_s(algorithm, chunks) for algorithm in DIGESTS}
    ratio = pace[WRITTEN] / pace["sha256"]
    part_s = {algorithm: 40 / pace[algorithm] for algorithm in DIGESTS}
    return [
        ("hashes", f"GB/s a core: sha256 | {WRITTEN}", pace["sha256"], pace[WRITTEN], f"{ratio:.1f}x", ">= 5x"),
        ("hashes", "CPU s to hash a 40 GB part", part_s["sha256"], part_s[WRITTEN], f"{ratio:.1f}x less", ""),
    ]


def run(bench) -> None:
    """The bench's part: its rows added to the table."""
    bench.rows += rows()
