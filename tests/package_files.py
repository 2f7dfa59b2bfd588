"""The package's source files and their module names, from pyproject.toml's package-dir: the one place that maps each
folder to the package it installs as (``rewards/`` is ``rewardkit.rewards``)."""

from __future__ import annotations

from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
_PACKAGE_DIR = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-dir"]
FOLDERS = {folder: package for package, folder in _PACKAGE_DIR.items()}  # folder -> package name


def module_name(path: Path) -> str:
    for folder, package in sorted(FOLDERS.items(), key=lambda kv: -len(kv[0])):
        base = ROOT / folder
        if path.is_relative_to(base):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            return ".".join([package, *parts])
    raise AssertionError(path)


# module name -> its file, every .py file of the package
SOURCES = {module_name(p): p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))}
