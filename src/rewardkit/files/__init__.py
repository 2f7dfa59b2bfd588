"""Files: the one JSONL reader (``jsonl.py``) and outputs that are never half-written (``outputs.py``)."""
