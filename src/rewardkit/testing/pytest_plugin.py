"""pytest plugin: the reward contract as fixtures and a marker (see docs/testing.md)."""
