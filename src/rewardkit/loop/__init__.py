"""The conversation loop: agent <-> simulated user <-> database, shared by GRPO rollouts, synthesis and evaluation.

:class:`~rewardkit.loop.episode.Episode` holds one conversation: a private database copy, the
task, the user simulator's view of the dialogue, the counters and how it ended. The ms-swift
scheduler (:mod:`rewardkit.plugins.scheduler`) and the offline driver (:mod:`rewardkit.loop.drive`)
both feed it the agent's turns, so an episode means the same thing in training, in data and in
reports.

- ``episode.py``: :class:`Episode`; ``drive.py``: whole episodes outside ms-swift, one or many at a time;
- ``agents.py``: the agents (``gold``, an OpenAI-compatible URL, a local checkpoint); ``gold.py``: the
  agent that follows a task's gold actions;
- ``user_sim/``: the simulated customers; ``endpoint.py``: the one HTTP client (retries, backoff,
  concurrency; one :class:`~rewardkit.loop.endpoint.EndpointSettings` holds them) that the HTTP agent and the LLM
  simulator share;
- ``config.py``: the ``rollout:`` config section (when an episode must stop).
"""
