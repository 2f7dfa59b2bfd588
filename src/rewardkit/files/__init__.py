"""Files: the one JSONL reader (``jsonl.py``), outputs that are never half-written (``outputs.py``), every report's
figure drawn and written one way (``figures.py``), and one writer per file (``lock.py``); and what is kept in memory
between batches, bounded in bytes (``cache.py``)."""
