"""Reaching a running job's Ray dashboard and live curves: SSM port forwarding to algo-1 (the launcher enables
SageMaker remote debugging for it), one session per port, and the job's token, kept on the laptop that
launched it."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from raycluster.auth import write_private
from raycluster.curves.publish import PROJECT
from raycluster.layout import AUTH_TOKEN_FILE, CURVES_PORT, DASHBOARD_PORT

JOBS_DIR = Path.home() / ".raycluster" / "jobs"


def token_path(job_name: str) -> Path:
    return JOBS_DIR / job_name / "auth_token"


def keep_token(job_name: str, token: str) -> Path:
    return write_private(token_path(job_name), token)


def port_forward_command(job_name: str, local_port: int, region: str | None, port: int = DASHBOARD_PORT) -> list[str]:
    command = [
        "aws",
        "ssm",
        "start-session",
        "--target",
        f"sagemaker-training-job:{job_name}_algo-1",
        "--document-name",
        "AWS-StartPortForwardingSession",
        "--parameters",
        json.dumps({"portNumber": [str(port)], "localPortNumber": [str(local_port)]}),
    ]
    return command + (["--region", region] if region else [])


def curves_forward_command(job_name: str, local_port: int, region: str | None) -> list[str]:
    return port_forward_command(job_name, local_port, region, CURVES_PORT)


def instructions(job_name: str, local_port: int, curves_port: int, region: str | None) -> str:
    token = token_path(job_name)
    lines = [shlex.join(port_forward_command(job_name, local_port, region))]
    if token.exists():
        lines.append(
            f"# then open http://localhost:{local_port} and sign in with the job's Ray token: {token} "
            "(saved when you launched the job)"
        )
    else:
        # Not launched from this machine: the token travels only with the job's code.
        lines += [
            f"# no token for {job_name} on this machine ({token} does not exist: the job was launched elsewhere).",
            f"# It is {AUTH_TOKEN_FILE} in the job's code channel; fetch it with:",
            f"#   mkdir -p {token.parent} && (umask 077; aws s3 cp $(aws sagemaker describe-training-job "
            f"--training-job-name {job_name} "
            "--query \"InputDataConfig[?ChannelName=='code'].DataSource.S3DataSource.S3Uri\" --output text)"
            f"/{AUTH_TOKEN_FILE} {token})",
            f"# then open http://localhost:{local_port} and sign in with it",
        ]
    lines.append(
        f"# submit your own job: RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH={token} "
        f"ray job submit --address http://localhost:{local_port} -- python jobs/cluster_info.py"
    )
    lines += [
        f"# the training's live curves (loss, samples/s, hardware per step), a second forwarding: "
        f"{shlex.join(curves_forward_command(job_name, curves_port, region))}",
        f"# then open http://localhost:{curves_port}/?project={PROJECT}",
    ]
    return "\n".join(lines)
