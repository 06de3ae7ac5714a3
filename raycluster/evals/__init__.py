"""Evaluating every published checkpoint while training goes on (``--cluster.async_eval``).

LeRobot's own flags say *what* is evaluated (``--dataset.eval_split`` and ``--max_eval_samples`` for the loss on
held-out episodes, ``--env.type`` and ``--eval.n_episodes`` for rollouts); ours say *when and where*: once per
checkpoint the keeper commits, as a Ray task on ``--cluster.eval_resources``, never inside LeRobot's loop (whose
inline evaluations are turned off: ``--eval_steps=0 --env_eval_freq=0``).

The data path: the checkpoint keeper commits a checkpoint and holds it against retention (``hold``) -> the
evaluation keeper (``keeper.py``, an actor on the driver's node) submits one task (``task.py``) -> the task fetches
the checkpoint's ``pretrained_model`` from whichever hosts hold it, loads it with LeRobot's own factories and
runs LeRobot's held-out loss and ``eval_policy_all`` (``raycluster/lerobot/``: ``policy_loading.py``,
``held_out.py``, ``rollouts.py``) -> the keeper records the outcome (``records.py``), logs it, puts it in the
curves, keeps the best (``best.py``) and releases the hold.

Why not Ray Train's own ``ValidationConfig`` (2.60, alpha): its controller waits for every pending validation
before ``fit()`` returns, so a SIGTERM would wait for them; it runs one validation at a time, so an instance group
of N CPU hosts could not run N; it validates a ``ray.train.Checkpoint`` reported through a barrier of every rank,
while ours are committed later, from every host's parts, by the keeper; and its results reach the driver only
when the run ends, too late for live curves, log lines and keeping the best. The shape of its API is kept: a
function of a checkpoint that returns a dict of metrics, a timeout enforced by ``ray.cancel(force=True)``, and its
statuses' names (``VALIDATED``, ``VALIDATION_FAILED``, ``VALIDATION_TIMEOUT``).
"""
