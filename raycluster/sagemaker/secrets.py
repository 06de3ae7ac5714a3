"""Each host reads the job's secrets from AWS Secrets Manager with the job's own role, before its Ray node
starts. A secret that is missing or that the role may not read ends the job here, named, never shown, and so
does a name the job may not set (a request may be made by hand); its id is never said either."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from raycluster.errors import UsageError
from raycluster.sagemaker.job_env import SECRETS_REGION, check_secret, secrets_asked

log = logging.getLogger(__name__)

TIMEOUT_S = 10
ATTEMPTS = 3
IAM_HINT = "allow secretsmanager:GetSecretValue on it (and kms:Decrypt on its key) to the job's role"


def region_of(secret: str, launched_in: str | None) -> str | None:
    """An ARN names its region; a name is read where the job was launched."""
    parts = secret.split(":")
    return parts[3] if secret.startswith("arn:") and len(parts) > 3 else launched_in


def read_secrets(environ: Mapping[str, str]) -> dict[str, str]:
    """NAME -> the secret's value, for every ``--secret NAME=...`` of the launch."""
    asked = secrets_asked(environ)
    if not asked:
        return {}
    import boto3
    import botocore.exceptions
    from botocore.config import Config

    config = Config(connect_timeout=TIMEOUT_S, read_timeout=TIMEOUT_S, retries={"max_attempts": ATTEMPTS})
    values = {}
    for name, secret in asked.items():
        check_secret(name, secret, hub_cache=True)  # the request may have been made by hand
        where = f"secret {name}"  # never its id: given by mistake, that may be the value
        try:
            client = boto3.client(
                "secretsmanager", region_name=region_of(secret, environ.get(SECRETS_REGION)), config=config
            )
            answer = client.get_secret_value(SecretId=secret)
        except botocore.exceptions.ClientError as exc:
            missing = f"{where} does not exist: create it, or fix --secret {name}=..."
            raise refusal(exc, missing, f"{where}: the job's role may not read it; {IAM_HINT}", where) from None
        except botocore.exceptions.NoCredentialsError:
            raise UsageError(f"{where}: no AWS credentials on this host (the job's role gives them)") from None
        except botocore.exceptions.BotoCoreError as exc:
            raise UsageError(f"{where} could not be read: {type(exc).__name__}") from None
        if "SecretString" not in answer:
            raise UsageError(f"{where} holds binary data; store the value as a string")
        values[name] = answer["SecretString"]
        log.info("read %s", where)
    return values


def refusal(exc, missing: str, denied: str, where: str) -> UsageError:
    """Secrets Manager's refusal (a botocore ClientError) as one line: ``missing`` or ``denied`` where it says so,
    else ``where`` with its code; never the secret's id, which AWS's own message may hold."""
    code = exc.response.get("Error", {}).get("Code", "")
    if code == "ResourceNotFoundException":
        return UsageError(missing)
    if code in ("AccessDeniedException", "AccessDenied"):
        return UsageError(denied)
    return UsageError(f"{where}: {exc.operation_name}: {code or type(exc).__name__}")
