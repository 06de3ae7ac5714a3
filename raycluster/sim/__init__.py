"""A SageMaker-shaped job on this one machine: each host a network namespace with its own address,
``/etc/hosts``, PID namespace, hostname, ``/tmp`` and ``/opt/ml``, running the real entry point."""
