"""What SageMaker runs on every host: ``python -u -m entry`` from the uploaded source directory."""
