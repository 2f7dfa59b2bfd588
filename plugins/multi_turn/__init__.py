"""ms-swift multi-turn schedulers (``--multi_turn_scheduler``): a simulated user talks to the policy.

- ``scheduler.py``: ``tau2_user``, MUA-RL's loop on ms-swift, one
  :class:`~rewardkit.plugins.rollout.episode.Episode` per rollout;
- ``tokens.py``: exact sampled token ids in every turn, for ms-swift versions that re-tokenize history;
- ``exclusion.py``: leaves episodes whose user simulator failed out of the GRPO loss.

Load with ``--external_plugins plugins/tau2_user.py``; that entry file registers the
``tau2_user`` key in ms-swift's ``multi_turns`` registry. ``scheduler`` and ``tokens`` import
ms-swift at module level (they build on its classes), which only this package and
``plugins/tau2_user.py`` may do; this ``__init__`` imports nothing, so importing the package
does not import ms-swift until one of those modules is imported.

May import: ``rewardkit.plugins.rollout`` (and ``rewardkit.plugins.rollout.termination``),
``rewardkit.plugins.user_sim``, ``rewardkit.plugins.envs`` and ``rewardkit.rewards``. Nothing but
``plugins/tau2_user.py`` imports it.
"""
