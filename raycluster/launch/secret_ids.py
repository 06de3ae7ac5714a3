"""Each ``--secret NAME=ID`` names a secret that exists, checked at launch with the caller's credentials
(Secrets Manager's DescribeSecret, which returns no value), so that a typo fails here in one line rather than on
every host after the instances have started. The id is never repeated: the flag is named by ``NAME`` only."""

from __future__ import annotations

from collections.abc import Mapping

from raycluster.errors import UsageError
from raycluster.sagemaker.secrets import refusal, region_of

DESCRIBE_HINT = "allow secretsmanager:DescribeSecret on it to the credentials that launch (the job's role reads it)"


def check_secrets_exist(secrets: Mapping[str, str], region: str, boto_session) -> None:
    """Raises UsageError for the first secret that is missing, scheduled for deletion or not describable."""
    import botocore.exceptions

    for name, secret in secrets.items():
        where = f"--secret {name}=..."
        secret_region = region_of(secret, region)
        try:
            described = boto_session.client("secretsmanager", region_name=secret_region).describe_secret(
                SecretId=secret
            )
        except botocore.exceptions.ClientError as exc:
            missing = f"{where}: no such secret in {secret_region}; create it, or fix the id"
            raise refusal(exc, missing, f"{where}: cannot tell that it exists; {DESCRIBE_HINT}", where) from None
        if described.get("DeletedDate"):
            raise UsageError(f"{where}: the secret is scheduled for deletion; restore it, or name another")
