"""Benchmarks: ``make bench`` (``python -m bench``) prints a table of ratios against plain LeRobot."""
