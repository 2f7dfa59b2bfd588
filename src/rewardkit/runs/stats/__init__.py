"""Numbers from runs.

- ``metrics.py``: pass^k, per-task statistics and the paired comparison; ``paired.py``: the paired bootstrap and
  sign test;
- ``tables.py``: the per-task table files and reading a run back; ``plots.py``: their figures;
- ``scoring.py``: a reward set over rows of (completion, columns).
"""
