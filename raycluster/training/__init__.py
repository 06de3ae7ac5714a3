"""The Ray Train side of a run, in three rooms: the driver's side (``driver/``: the ``TorchTrainer`` and what it
publishes through), each worker's side (``worker/``: LeRobot's loop on one rank), and what watches them for hangs
(``watch/``). What both sides share sits here: the run's journal (``journal.py``), its phases (``phases.py``),
a stop's agreement (``interrupt.py``) and the summary (``summary.py``)."""
