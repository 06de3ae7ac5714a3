"""Each Ray Train worker's side: LeRobot's loop on one rank (``loop.py``), where it starts (``resume.py``), what it
records per step (``recorder.py``) and for the curves (``curve_hooks.py``), how its host's part of a checkpoint
is shipped (``shipping.py``), and the tracker LeRobot started (``tracker.py``)."""
