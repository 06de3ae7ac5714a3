"""LeRobot's one door: every ``import lerobot`` in raycluster is in this package, so the next LeRobot release is
met here and nowhere else (``tests/test_code_shape.py`` fails on an import of ``lerobot`` anywhere else).

- ``api.py``: the touch points both LeRobot lines share (the flag parser, the loop functions we wrap, the
  checkpoint layout); ``lines/``: how ``train`` is called, one module per line (0.6.x, main), picked from
  LeRobot's source without importing it;
- ``flags.py``: the few values of LeRobot's flags the driver needs, read without importing LeRobot;
- ``log_lines.py``: LeRobot's progress bar and Ray Train's report lines, made for a log file;
- ``policy_loading.py``, ``held_out.py``, ``rollouts.py``: an evaluation's policy, held-out loss and rollouts,
  each by LeRobot's own code;
- ``dataset.py``, ``pusht_dataset.py``: small LeRobot datasets made locally (synthetic, PushT by a scripted
  pusher), for the demo, the tests and the bench.
"""
