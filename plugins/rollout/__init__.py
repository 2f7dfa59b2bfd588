"""The agent <-> simulated user <-> database loop, shared by GRPO rollouts, synthesis and evaluation.

:class:`~rewardkit.plugins.rollout.episode.Episode` holds one conversation: a private
database copy, the task, the user simulator's view of the dialogue, the counters and
the termination reason. The ms-swift scheduler (:mod:`rewardkit.plugins.multi_turn`)
and the offline driver (:mod:`rewardkit.plugins.rollout.drive`) both feed it the
agent's turns, so an episode means the same thing in training, in data and in reports.
"""
