"""Runs of the loop and the rewards over many tasks or rows: what ``synth``, ``eval`` and ``score`` do.

- ``spec.py``: the run specification (who plays agent and user, which tasks, the limits) and the plan
  it builds;
- ``episode_log.py``: the resumable episode log (one writer at a time); ``records.py``: the field-by-field
  check of every episode record read back;
- ``trials.py``: running a plan's trials into the log; ``scorer.py``: the training rewards on one finished
  episode, its record; ``progress.py``: the progress bar; ``selection.py``: which tasks a run plays;
- ``synthesis.py``: verified trajectories -> SFT rows; ``evaluation.py``: pass^k and the report;
- ``metrics.py``: pass^k, per-task statistics and the paired comparison; ``tables.py``: the per-task table
  files and reading a run back; ``plots.py``: their figures;
- ``scoring.py``: a reward set over rows of (completion, columns).
- ``domain_check.py``: ``rewardkit env check``, a domain's tools, tasks, splits and policy checked before
  training, with the task-completion reward scoring agents that do nothing; ``domain_data_check.py``: its
  checks of the data as a whole (task ids, splits, policy, guidelines).
"""
