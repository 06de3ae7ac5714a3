"""AWS's refusals as one line a user can act on."""

from __future__ import annotations

from raycluster.errors import UsageError


class AwsError(UsageError):
    """AWS refused or could not be reached; the message says what to fix."""


def one_line(exc: Exception) -> str:
    """AWS's own words, with the fix for the failures a first launch meets."""
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError, NoRegionError

    if isinstance(exc, NoCredentialsError):
        return "no AWS credentials; run `aws configure` (or `aws sso login`) or set AWS_PROFILE"
    if isinstance(exc, NoRegionError):
        return "no AWS region; pass --region or set AWS_DEFAULT_REGION"
    if isinstance(exc, EndpointConnectionError):
        return f"cannot reach AWS ({exc}); check the network, --region and AWS_ENDPOINT_URL"
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{exc.operation_name}: {error.get('Code')}: {error.get('Message')}"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1] if text else ''}"
