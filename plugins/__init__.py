"""What ms-swift loads besides the rewards: the multi-turn GRPO adapter and the live diagnostics.

- ``simulated_user.py``: the entry file for ``swift rlhf --external_plugins``; it registers the
  ``simulated_user`` multi-turn scheduler and the advantage exclusion;
- ``scheduler.py``: the scheduler, one :class:`rewardkit.loop.episode.Episode` per rollout;
- ``tokens.py``: the sampled token ids and loss mask of each agent turn;
- ``exclusion.py``: rollouts whose user simulator failed are left out of the group statistics and
  the loss;
- ``diagnostics.py``: the entry file of the live GRPO diagnostics (``--callbacks rewardkit_diagnostics``): group
  shares, None rates and reward latency in ms-swift's metrics, and the thresholds that warn or stop the run.

These are the only modules that import ms-swift at module level, and nothing imports them
(:mod:`rewardkit.layers`). This file imports nothing, so that loading one plugin loads no other.
"""
