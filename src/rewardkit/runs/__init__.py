"""Runs of the loop and the rewards over many tasks or rows, one folder per family:

- ``episodes/``: running the loop over many tasks (``synth``, ``eval``): the run spec, the episode log, trials,
  the scorer, synthesis and evaluation;
- ``stats/``: numbers from runs: pass^k, the paired comparison, tables, figures, a reward set scored over rows;
- ``training/``: reading a GRPO run (``audit``, ``calibrate``): the audit, the step check, calibration;
- ``viewer/``: the episode viewer's page;
- ``tasks/``: generating and checking tau2 tasks (``tasks generate``);
- ``domains/``: checking a domain before training (``env check``).
"""
