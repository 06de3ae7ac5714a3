"""What watches the ranks for hangs: each rank's beacon and the board it beats to (``progress.py``, with the
rank's process in ``rank_process.py``), the driver's verdict (``watchdog.py``), its line (``hang_report.py``),
and the stacks taken on each rank's node (``stacks.py``)."""
