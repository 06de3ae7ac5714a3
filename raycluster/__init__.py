"""raycluster: a Ray cluster inside a SageMaker training job that trains LeRobot policies.

The package follows the data path: SageMaker env -> topology -> Ray nodes -> job submission ->
TorchTrainer -> worker loop (Accelerator + LeRobot's ``train``) -> checkpoints.
"""

__version__ = "0.1.0"
