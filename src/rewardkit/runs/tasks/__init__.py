"""Generating and checking tau2 tasks: what ``tasks generate`` does.

- ``blueprints.py``: what a model drafts; ``task_gen.py``: drafting, replaying and keeping tasks;
- ``task_checks.py``: the checks a generated task passes; ``task_file.py``: the tasks file written.
"""
