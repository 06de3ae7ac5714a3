"""What SageMaker hands a training job (environment, /opt/ml), read and checked before anything starts."""
