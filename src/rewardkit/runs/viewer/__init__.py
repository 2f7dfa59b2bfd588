"""The episode viewer: one self-contained HTML page (``page.py``, with ``viewer.html``) of an episode log or of a
GRPO run's completions."""
