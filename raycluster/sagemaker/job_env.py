"""The job's own environment: what ``raycluster launch --env/--secret/--hub-cache-s3`` asked for, checked at
launch and made on every host before its Ray node starts, so that the node, the job's driver and every rank
inherit it (Ray's workers get the environment of the raylet that forks them).

A secret travels as its Secrets Manager id only (``RAYCLUSTER_SECRET__<NAME>=<id>`` in the request's
Environment); each host reads the value with the job's own role, and it is put in no request, hyperparameter,
runtime env or log: a Ray job's runtime env is shown on the dashboard, the request by DescribeTrainingJob.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path

from raycluster.errors import UsageError

SECRET_PREFIX = "RAYCLUSTER_SECRET__"
SECRETS_REGION = "RAYCLUSTER_SECRETS_REGION"
"""The launch's region: where a secret given by name (not ARN) is read."""
HUB_CHANNEL = "hub"
HUB_ENV = ("HF_HUB_CACHE", "HF_HUB_OFFLINE")
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")  # SageMaker's rule for Environment keys
MAX_ENTRIES = 100
MAX_LENGTH = 512  # SageMaker's limit on an Environment key and on its value
OWNED_PREFIXES = ("SM_", "SAGEMAKER_", "RAYCLUSTER_", "TRAINING_JOB_", "AWS_", "RAY_AUTH_")
"""SageMaker's, ours, Ray's auth (the job's token) and the role's credentials (an AWS_* variable would replace
what the role grants)."""
OWNED_NAMES = frozenset(
    {"PATH", "HOME", "PYTHONPATH", "PYTHONHOME", "LD_PRELOAD", "LD_LIBRARY_PATH", "RAY_ADDRESS"}
    | {"RAY_JOB_STOP_WAIT_TIME_S"}
)
SECRET_REFUSED_PREFIXES = ("RAY_",)
"""Ray copies RAY_* variables of the driver into the runtime envs it starts, which the dashboard shows."""
CREDENTIAL = re.compile(
    r"(^|_)(TOKEN|API_?KEY|KEY|SECRET|PASSWORD|PASSWD|PASS|PAT|ACCESS_KEY|PRIVATE_KEY|CREDENTIALS?)(_|\Z)"
)
URL_WITH_PASSWORD = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]*:[^/@\s]+@")
"""``postgres://user:pass@host/db``: a credential whatever the variable's name."""
WHERE_SUFFIXES = ("_PATH", "_FILE", "_DIR")
"""Where a credential is (HF_TOKEN_PATH), not one."""
SWITCH = re.compile(r"^(0|1|true|false|yes|no|on|off)\Z", re.IGNORECASE)
"""A value no credential has: HF_HUB_DISABLE_IMPLICIT_TOKEN=1 is a switch."""
SECRET_ID = re.compile(r"^(arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[\w/+=.@-]+|[\w/+=.@-]{1,512})\Z")
TOKEN_PREFIXES = ("hf_", "sk-", "sk_", "ghp_", "gho_", "ghu_", "ghs_", "github_pat_", "glpat-", "xoxb-", "xoxp-")
TOKEN_PREFIXES += ("AKIA", "ASIA")
"""How tokens begin (Hugging Face, OpenAI and Stripe, GitHub, GitLab, Slack, AWS access keys): no secret's name."""
RANDOM_BITS = 4.3
"""Bits per character above which a long name with no separator reads as random: a token, not a name."""
SEPARATORS = re.compile(r"[/._@+=:-]")
AWS_SECRET_KEY = re.compile(r"^[A-Za-z0-9/+]{40}\Z")
"""An AWS secret access key: 40 characters of base64, '/' and '+' among them."""
JWT = re.compile(r"^eyJ[\w-]+\.eyJ[\w-]+\.[\w-]*\Z")
"""A JSON Web Token: base64url header and claims (both begin as ``{"`` does), and a signature."""


def looks_like_a_value(secret_id: str) -> bool:
    """A token's own text where a secret's name or ARN belongs: a prefix tokens carry, or a token's shape."""
    prefixed = secret_id.startswith(TOKEN_PREFIXES) and len(secret_id) >= 20  # hf_token is a name, hf_AbC... not
    return prefixed or token_shaped(secret_id)


def token_shaped(text: str) -> bool:
    """A long hex string (W&B's keys), an AWS secret access key, a JWT, or a long run between separators whose
    characters are as varied as random ones (names have words: ``team/hf-token``, ``HF_TOKEN``)."""
    if re.fullmatch(r"[0-9a-fA-F]{32,}", text) or JWT.match(text):
        return True
    if AWS_SECRET_KEY.match(text) and all(re.search(p, text) for p in ("[a-z]", "[A-Z]", "[0-9]")):
        return True
    return any(len(run) >= 24 and random_like(run) for run in SEPARATORS.split(text))


def random_like(text: str) -> bool:
    """Bits per character (Shannon, over the text's own characters) at or above a random string's."""
    counts = [text.count(c) for c in set(text)]
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts) >= RANDOM_BITS


def check_secret(name: str, secret_id: str, hub_cache: bool) -> None:
    """One ``--secret NAME=ID``, checked at launch and again on every host (a request may be made by hand);
    the id is never repeated in what is said (given by mistake, it may be the value)."""
    check_name("--secret", name, hub_cache)
    if name.startswith(SECRET_REFUSED_PREFIXES):
        raise UsageError(f"--secret {name}=...: Ray shows RAY_* variables on the dashboard; choose another name")
    if looks_like_a_value(secret_id):
        raise UsageError(
            f"--secret {name}=...: that looks like the secret's value, not its name (DescribeTrainingJob shows "
            f"the request); store the value in AWS Secrets Manager and pass --secret {name}=<secret name or ARN>"
        )
    if not SECRET_ID.match(secret_id):
        raise UsageError(f"--secret {name}=...: expected a Secrets Manager secret name or ARN")


def check_name(flag: str, name: str, hub_cache: bool) -> None:
    if token_shaped(name):  # never repeated: a value given as the name is shown by DescribeTrainingJob
        raise UsageError(
            f"{flag} ...: that name looks like a secret's value; give {flag} NAME=..., NAME a variable's name"
        )
    if not NAME.match(name) or len(name) > MAX_LENGTH - len(SECRET_PREFIX):
        raise UsageError(f"{flag} {name}=...: a name is letters, digits and '_', not starting with a digit")
    if name in OWNED_NAMES or name.startswith(OWNED_PREFIXES) or (hub_cache and name in HUB_ENV):
        owner = "--hub-cache-s3 sets it" if name in HUB_ENV else "SageMaker or raycluster sets it on every host"
        raise UsageError(f"{flag} {name}=...: {name} is not yours to set ({owner}); choose another name")


def job_environment(
    env: Mapping[str, str], secrets: Mapping[str, str], hub_cache: bool, region: str, owned: Mapping[str, str] = {}
) -> dict:
    """The request's Environment for ``--env`` and ``--secret`` (each checked, with the fix in one line), with
    raycluster's own ``owned`` entries (counted against SageMaker's limit too)."""
    for name, value in env.items():
        check_name("--env", name, hub_cache)
        named = CREDENTIAL.search(name.upper()) and not name.endswith(WHERE_SUFFIXES) and not SWITCH.match(value)
        if named or URL_WITH_PASSWORD.match(value):
            raise UsageError(
                f"--env {name}=...: it looks like a credential, and DescribeTrainingJob shows every --env value; "
                f"store it in AWS Secrets Manager and pass --secret {name}=<secret name or ARN>"
            )
        if len(value) > MAX_LENGTH:
            raise UsageError(f"--env {name}=...: values are at most {MAX_LENGTH} characters (SageMaker's limit)")
    for name, secret in secrets.items():
        check_secret(name, secret, hub_cache)
        if name in env:
            raise UsageError(f"--secret {name} and --env {name}: give {name} one way")
    environment = {**env, **{SECRET_PREFIX + name: secret for name, secret in secrets.items()}, **owned}
    if secrets:
        environment[SECRETS_REGION] = region
    if len(environment) > MAX_ENTRIES:
        raise UsageError(
            f"--env and --secret: at most {MAX_ENTRIES - 1 - len(owned)} in all (SageMaker's limit on Environment)"
        )
    return environment


def secrets_asked(environ: Mapping[str, str]) -> dict[str, str]:
    """NAME -> secret id, as the launch put them in the request."""
    return {key.removeprefix(SECRET_PREFIX): value for key, value in environ.items() if key.startswith(SECRET_PREFIX)}


def hub_cache_env(channels: Mapping[str, Path]) -> dict[str, str]:
    """The Hub's files from the ``hub`` channel: huggingface_hub (and so LeRobot and transformers) reads its
    cache there and never the network, so a first step never waits for the Hub, nor fails on a host without a
    route to it."""
    if HUB_CHANNEL not in channels:
        return {}
    return {"HF_HUB_CACHE": str(channels[HUB_CHANNEL]), "HF_HUB_OFFLINE": "1"}


def tracker_env(environ: Mapping[str, str]) -> dict[str, str]:
    """W&B's own SageMaker integration names a run after the job and the host, over the id LeRobot passes to
    resume: every restarted job (a spot reclaim) would start a new run. LeRobot's id wins instead; a value the
    job set itself (``--env WANDB_SAGEMAKER_DISABLE=false``) is kept."""
    return {} if "WANDB_SAGEMAKER_DISABLE" in environ else {"WANDB_SAGEMAKER_DISABLE": "true"}
