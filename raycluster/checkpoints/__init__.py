"""Checkpoints that survive: a keeper actor on the driver's node publishes what rank 0 saves, complete-only,
into a local directory (``/opt/ml/checkpoints`` on SageMaker) or S3, and hands it back on resume."""
