"""Gold outcomes and what an agent communicated: what the rollout loop shares with the task-completion rewards.

A public facade over the private ``_episodes`` module, so that the loop (``rewardkit.loop``,
``rewardkit.plugins``) and the rewards compute a task's gold state the same way, once per task and
process. Reading and checking a task is :mod:`rewardkit.envs.tasks`; :func:`task_check` (a reason, for a run that
counts bad tasks) and :func:`checked_task` (a TaskError, as the rewards and the scheduler raise it) add the check of
its gold replay (the cached gold outcome).
"""

from rewardkit.rewards._episodes import checked_task, communicated_texts, gold_outcome, task_check

__all__ = ["checked_task", "communicated_texts", "gold_outcome", "task_check"]
