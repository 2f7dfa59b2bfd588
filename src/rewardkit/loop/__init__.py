"""The agent <-> simulated user <-> database loop, shared by GRPO rollouts, synthesis and evaluation.

:class:`~rewardkit.loop.episode.Episode` holds one conversation: a private
database copy, the task, the user simulator's view of the dialogue, the counters and
the termination reason. The ms-swift scheduler (:mod:`rewardkit.plugins`)
and the offline driver (:mod:`rewardkit.loop.drive`) both feed it the
agent's turns, so an episode means the same thing in training, in data and in reports.

- ``episode.py``: :class:`Episode`; ``drive.py``: whole episodes outside ms-swift;
  ``gold.py``: an agent that follows a task's gold actions; ``config.py``: the ``rollout:``
  config section (when an episode must stop); ``termination.py``: why an episode ended.

May import: ``rewardkit.envs``, ``rewardkit.loop.user_sim``, ``rewardkit.rewards`` and
``rewardkit.envs.termination``. ``termination.py`` imports nothing and this ``__init__``
imports nothing: the rewards import ``termination``, which runs this file first, and must not pull
in the loop (which imports the rewards). Never ms-swift at module level, nor the builders or the CLI.
"""
