"""Ray Train side of a run: the driver builds the TorchTrainer, each worker runs LeRobot's loop."""
