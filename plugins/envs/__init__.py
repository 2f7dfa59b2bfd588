"""Tool-use environments backed by real databases."""
