"""The progress bar of a run of trials: episodes done, successes and infrastructure errors, on stderr."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


class ProgressBar:
    """A rich progress bar on stderr with running success and infrastructure-error counts."""

    def __init__(self, total: int, skipped: int, label: str, enabled: bool) -> None:
        self.total, self.skipped, self.label, self.enabled = total, skipped, label, enabled
        self.ok = self.infra = 0

    def __enter__(self) -> Callable[[dict[str, Any]], None]:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[stats]}"),
            console=Console(file=sys.stderr),
            disable=not self.enabled,
        )
        resumed = f" ({self.skipped} done before)" if self.skipped else ""
        self.task = self.progress.add_task(f"{self.label}{resumed}", total=self.total, stats="")
        self.progress.start()
        return self.advance

    def advance(self, record: dict[str, Any]) -> None:
        self.ok += record["reward"] == 1.0
        self.infra += record["status"] == "infra_error"
        self.progress.update(self.task, advance=1, stats=f"completed {self.ok}  infra errors {self.infra}")

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()
