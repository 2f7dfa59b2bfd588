"""Builders for the merchant-planner pipeline: teacher SFT rows and GRPO rows.

- ``sft.py`` (``planning-sft``): R1-distilled teacher outputs -> SFT rows, kept only where the
  rewards pass them;
- ``grpo.py`` (``planning-grpo``): annotated plans -> GRPO rows (``messages``, ``solution``, ``experts``);
- ``_records.py``: the input records, checked field by field; ``_common.py``: prompt rendering,
  history windows and input mixing.

Imports as :mod:`rewardkit.data_builders`: the rewards' public modules (the answer format, the
reward classes) and the recipes' prompt templates.
"""
