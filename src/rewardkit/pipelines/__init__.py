"""``rewardkit recipe run``: SFT -> GRPO chains as resumable stages.

- ``stages.py``: the stage skeleton (markers, output checks, ``swift`` launches) both chains share;
- ``planning.py`` and ``agent.py``: the two chains; ``tiny_model.py``: the offline tiny Qwen3 of the
  CPU presets;
- ``grpo_log.py``: a GRPO run's ``logging.jsonl`` in numbers; ``agent_report.py``: the agent chain's summary.
"""
