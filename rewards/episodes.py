"""Reading tau2 rows and their gold outcomes: what the rollout loop shares with the task-completion rewards.

A public facade over the private ``_episodes`` module, so that the loop
(``rewardkit.loop``, ``rewardkit.plugins``) and the rewards
read tasks and gold states the same way.
"""

from rewardkit.rewards._episodes import (
    TaskError,
    communicated_texts,
    expected_outputs,
    gold_actions,
    gold_outcome,
    read_task,
)

__all__ = ["TaskError", "communicated_texts", "expected_outputs", "gold_actions", "gold_outcome", "read_task"]
