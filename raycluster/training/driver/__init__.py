"""The driver's side of a run, on the node that runs the job: flags made absolute (``paths.py``), Ray Train's
settings (``ray_train_env.py``), the actors it publishes through (``keepers.py``), the ``TorchTrainer`` and its
end (``run.py``), a failure's cause (``causes.py``), and the job script's entry (``train_job.py``)."""
