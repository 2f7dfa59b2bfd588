"""rewardkit: composable GRPO rewards and recipes for ms-swift."""

__version__ = "0.1.0"
