"""tau2-bench's retail domain on SQLite (data: MIT, see data/LICENSE and data/SOURCE.md)."""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent / "data"
