"""The job's environment over the image: what ``requirements.txt`` adds to the image's packages, installed once,
kept as one archive (in S3, or in a warm pool's persistent cache) under a key of what decides it, and restored at
every later start with that key: no installer, no package index. Runs before anything but the standard library
and boto3 (the image's) is importable, so nothing here imports more."""
