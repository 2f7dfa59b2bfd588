"""Checking a domain before training: what ``env check`` does.

- ``domain_check.py``: its tools, tasks, splits and policy, with the task-completion reward scoring agents that do
  nothing; ``domain_data_check.py``: its checks of the data as a whole (task ids, splits, policy, guidelines).
"""
