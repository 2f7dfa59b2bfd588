"""Running the loop over many tasks: what ``synth`` and ``eval`` do.

- ``spec.py``: the run specification (who plays agent and user, which tasks, the limits) and the plan it builds;
  ``selection.py``: which tasks a run plays;
- ``trials.py``: running a plan's trials into the log; ``scorer.py``: the training rewards on one finished episode,
  its log record; ``progress.py``: the progress bar;
- ``episode_log.py``: the resumable episode log (one writer at a time); ``records.py``: the field-by-field check of
  every log record read back;
- ``synthesis.py``: verified trajectories -> SFT rows, with ``judging.py`` (the judge's verdicts) and ``faults.py``
  (whose fault a rejection is); ``evaluation.py``: pass^k and the report.
"""
