"""Native ms-swift YAML recipes shipped with rewardkit."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent


def recipe_path(name: str) -> Path:
    """Path of a bundled recipe file such as ``planning/rewards.yaml``."""
    path = ROOT / name
    if not path.is_file():
        available = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("*/*.yaml"))
        raise FileNotFoundError(f"no recipe {name!r}; available: {available}")
    return path
