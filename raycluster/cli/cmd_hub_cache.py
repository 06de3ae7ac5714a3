"""``raycluster hub-cache``: stage a Hugging Face Hub cache to S3 for a job's ``--hub-cache-s3``."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(verbs) -> None:
    parser = verbs.add_parser(
        "hub-cache",
        help="stage a Hub cache (hf download --cache-dir) to S3, for launch --hub-cache-s3",
        description="Sends each repo's refs and snapshot files of CACHE_DIR to S3_URI with your AWS credentials. "
        "A job launched with --hub-cache-s3 S3_URI reads the Hub's files there (HF_HUB_OFFLINE=1 on every host): "
        "--policy.path=REPO_ID and what the policy loads from the Hub itself (a VLM backbone's config, processor).",
    )
    parser.add_argument("cache_dir", type=Path, metavar="CACHE_DIR")
    parser.add_argument("uri", metavar="S3_URI")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from raycluster.hub_cache import stage_hub_cache

    staged = stage_hub_cache(args.cache_dir, args.uri)
    print(f"staged {', '.join(staged.repos)} ({staged.files} files); launch with --hub-cache-s3 {args.uri}")
    return 0
