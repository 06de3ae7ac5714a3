"""From a laptop to a SageMaker training job: ``raycluster launch`` and ``raycluster status``
(``pip install 'raycluster[launch]'`` for the SageMaker SDK)."""
