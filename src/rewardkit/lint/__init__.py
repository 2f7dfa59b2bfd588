"""`rewardkit lint`: preflight checks of rewards, recipes and loss masks (see docs/lint.md)."""
