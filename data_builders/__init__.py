"""Builders that turn raw data into ms-swift JSONL datasets; ``rewardkit build <name>`` runs them.

- ``planning/``: the merchant planner's teacher SFT rows (``planning-sft``, filtered by the
  rewards) and GRPO rows (``planning-grpo``);
- ``tau2.py`` and ``tau2_tasks.py``: tau2-bench tasks -> GRPO rows for multi-turn tool use
  (``tau2-grpo``);
- ``_io.py``: JSONL reading and writing, and the build report every builder keeps
  (``read == written + rejected``, each reject with its reason).

Above the rewards and the recipes, below the loop (:mod:`rewardkit.layers`): builders use the
rewards' public modules (such as ``rewardkit.rewards.answers``), the recipes' prompt templates, and
the domains and task checks of ``rewardkit.envs``. Never ms-swift: builders run offline, without a
GPU, and give the same rows whatever the environment.
"""

from rewardkit.data_builders._io import BuildError, BuildReport, write_jsonl
from rewardkit.data_builders.planning._common import InputSpec, PromptTemplate, parse_input

__all__ = ["BuildError", "BuildReport", "InputSpec", "PromptTemplate", "parse_input", "write_jsonl"]
