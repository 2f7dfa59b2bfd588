"""Reading a GRPO run: what ``audit`` and ``calibrate`` do.

- ``audit.py``: group shares, reward variance, turns and flags of a run; ``audit_report.py``: its report and figures;
- ``step_check.py``: whether each step's update raised the reward it was computed from;
- ``calibrate.py``: a reward against human labels.
"""
