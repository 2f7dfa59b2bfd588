"""Gold outcomes and what an agent communicated: what the rollout loop shares with the task-completion rewards.

A public facade over the private ``_episodes`` module, so that the loop (``rewardkit.loop``,
``rewardkit.plugins``) and the rewards compute a task's gold state the same way, once per task and
process. Reading and checking a task is :mod:`rewardkit.envs.tasks`.
"""

from rewardkit.rewards._episodes import communicated_texts, gold_outcome

__all__ = ["communicated_texts", "gold_outcome"]
