"""The SageMaker session a launch goes through: it records where it uploads, so that a launch that created no job
removes what it put in S3; offline (the dry run, the sim), it answers every upload with the S3 URI it would have
had and refuses every AWS call before it is signed."""

from __future__ import annotations

import logging

from raycluster.errors import UsageError
from raycluster.launch.spec import LaunchSpec

log = logging.getLogger(__name__)


def code_bucket(spec: LaunchSpec) -> str | None:
    """The code goes to the bucket the job already writes to; the SDK's default bucket would need STS."""
    return next((uri.removeprefix("s3://").split("/")[0] for uri in (spec.output_s3, spec.checkpoint_s3) if uri), None)


def staging_session(spec: LaunchSpec, offline: bool):
    """A SageMaker session that records where it uploads (to undo a failed launch) or, offline, answers
    every upload with the S3 URI it would have had and refuses every AWS call before it is signed."""
    import boto3
    from sagemaker.core.helper.session_helper import Session

    boto_session = boto3.Session(region_name=spec.region) if spec.region else boto3.Session()
    if not boto_session.region_name:
        raise UsageError("no AWS region: pass --region (or set AWS_DEFAULT_REGION)")
    bucket = code_bucket(spec) or ("raycluster-dry-run" if offline else None)

    class StagingSession(Session):
        uploads: list[str]  # set on the instance below: where this session put (or would put) files

        def upload_data(self, path, bucket=None, key_prefix="data", callback=None, extra_args=None):
            uri = f"s3://{bucket or self.default_bucket()}/{key_prefix}"
            self.uploads.append(uri)
            if offline:
                return uri
            return super().upload_data(path, bucket, key_prefix, callback, extra_args)

        def default_bucket(self):
            # The SDK would create a missing bucket; a typo in --output-s3 must fail instead.
            return bucket or super().default_bucket()

    if offline:

        def refuse(event_name, **_):
            raise Offline(event_name)

        # Whatever else the SDK tries (its check of the role among them) stops here, unsent.
        boto_session.events.register("before-parameter-build", refuse)
    session = StagingSession(boto_session=boto_session, default_bucket=bucket)
    session.uploads = []
    return session


class Offline(Exception):
    pass


def remove_uploads(session) -> None:
    """A launch that created no job leaves nothing behind in S3."""
    s3 = session.boto_session.client("s3")
    for uri in session.uploads:
        bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        try:
            for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
                keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
                if keys:
                    s3.delete_objects(Bucket=bucket, Delete={"Objects": keys})
        except Exception as exc:  # the launch already failed; say what is left rather than hide it
            log.warning("could not remove %s after the failed launch: %s", uri, exc)
