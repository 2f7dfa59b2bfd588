"""``swift deploy`` of a local model on CPU for end-to-end tests: the package's own server runner
(:func:`rewardkit.pipelines.real_model.served`), one request at a time."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from rewardkit.pipelines.real_model import served


@contextlib.contextmanager
def swift_deploy(model: Path, log_path: Path, name: str) -> Iterator[str]:
    """Serve ``model`` (a tiny Qwen3: its type is in its config) as ``name`` on a free local port; yields the base
    URL (``…/v1``)."""
    with served(model, log_path, name, args=("--infer_backend", "transformers"), batch=1, timeout_s=240) as url:
        yield url
