"""A Hugging Face Hub cache (what ``hf download --cache-dir DIR`` writes) staged to S3 for a job's ``hub``
channel: each repo's refs and its snapshots' files as plain objects, so that huggingface_hub, offline on the
hosts, resolves a repo id to its files there. The blobs the snapshots link to are not sent twice."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from raycluster.cluster_config import S3_URI
from raycluster.errors import UsageError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Staged:
    repos: list[str]
    files: int
    size: int


def cache_files(cache_dir: Path) -> tuple[list[str], list[tuple[Path, str]]]:
    """The repos of ``cache_dir`` (read by huggingface_hub's own scan) and each file to send, with its key."""
    from huggingface_hub import CacheNotFound, scan_cache_dir

    try:
        info = scan_cache_dir(cache_dir)
    except CacheNotFound:
        raise UsageError(
            f"{cache_dir}: no Hub cache there; make one with: hf download REPO --cache-dir {cache_dir}"
        ) from None
    if info.warnings:
        raise UsageError(f"{cache_dir}: not a whole Hub cache ({info.warnings[0]}); download it again with hf download")
    if not info.repos:
        raise UsageError(f"{cache_dir}: the cache holds no repo; hf download REPO --cache-dir {cache_dir} first")
    root = cache_dir.resolve()
    files = []
    for repo in sorted(info.repos, key=lambda r: r.repo_id):
        refs = repo.repo_path / "refs"
        files += [(ref, str(ref.relative_to(root))) for ref in sorted(refs.rglob("*")) if ref.is_file()]
        for revision in sorted(repo.revisions, key=lambda r: r.commit_hash):
            snapshot = sorted(revision.files, key=lambda f: f.file_path)
            files += [(f.file_path, str(f.file_path.relative_to(root))) for f in snapshot]
    return [f"{r.repo_type}:{r.repo_id}" for r in sorted(info.repos, key=lambda r: r.repo_id)], files


def stage_hub_cache(cache_dir: Path, uri: str) -> Staged:
    if not S3_URI.match(uri):
        raise UsageError(f"{uri!r} is not an s3://bucket/prefix URI")
    repos, files = cache_files(cache_dir)
    import boto3

    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    s3 = boto3.client("s3")
    size = 0
    for path, key in files:
        s3.upload_file(str(path), bucket, f"{prefix.rstrip('/')}/{key}" if prefix else key)  # a link: its blob
        size += path.stat().st_size
    log.info("staged %d file(s), %.1f MB, of %s to %s", len(files), size / 1e6, ", ".join(repos), uri)
    return Staged(repos, len(files), size)
