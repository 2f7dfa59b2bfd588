"""ms-swift plugins other than rewards: environments, multi-turn schedulers, user simulators."""
