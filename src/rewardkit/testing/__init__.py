"""The reward contract as a library (see docs/testing.md)."""
