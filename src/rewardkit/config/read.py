"""Reading the config file: ``$REWARDKIT_CONFIG`` or a given path, parsed once per version of the file.

Every way a file can fail to be a YAML mapping is one :class:`ConfigError` naming the file (and, for a syntax
error, the line and column); checking what the mapping says is :mod:`rewardkit.config.load`'s job.
"""

from __future__ import annotations

import collections
import copy
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from rewardkit.config.declare import ConfigError

ENV_VAR = "REWARDKIT_CONFIG"


def _read_yaml(file: Path, name: str) -> Any:
    """The YAML in ``file``; every way of failing is a ConfigError naming ``name`` (and the line, for syntax)."""
    if file.is_dir():
        raise ConfigError(f"{name}: is a directory; point it at a YAML file")
    if not file.is_file():
        raise ConfigError(f"{name}: file not found; point it at a YAML file or unset it")
    try:
        text = file.read_text(encoding="utf-8-sig")  # -sig: a leading BOM is not part of the YAML
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{name}: not UTF-8 text (byte {exc.start} is {exc.object[exc.start]:#04x}); save it as UTF-8"
        ) from exc
    except OSError as exc:
        raise ConfigError(f"{name}: cannot be read ({exc.strerror or exc}); check its permissions") from exc
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise ConfigError(f"{name}: invalid YAML at {at}{exc.problem or exc.context}") from exc
    except (yaml.YAMLError, ValueError, RecursionError) as exc:  # ValueError: a date such as 2020-13-01
        raise ConfigError(f"{name}: invalid YAML: {exc}") from exc


# Parsed files by (path, mtime, ctime, size, inode, device): each version of a file is read once per process.
# Failures are not kept, so a fixed file is read again; a few entries are enough (one file per run, a handful in
# tests).
_FILES: collections.OrderedDict[tuple[Any, ...], dict[str, Any]] = collections.OrderedDict()
_FILES_MAX = 8
_LOCK = threading.Lock()


def _file_key(path: str | os.PathLike[str]) -> tuple[Any, ...] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (os.fspath(path), st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_dev)


def read_config_file(path: str | os.PathLike[str] | None = None) -> tuple[dict[str, Any], str]:
    """The YAML mapping in ``path`` (default: ``$REWARDKIT_CONFIG``; ``{}`` if unset) and its name for messages.

    Each version of a file is parsed once per process; the caller gets its own copy.
    """
    from_env = path is None
    path = path if path is not None else os.environ.get(ENV_VAR) or None
    if path is None:
        return {}, "config"
    key = _file_key(path)
    with _LOCK:
        cached = _FILES.get(key) if key is not None else None
        if cached is not None:
            _FILES.move_to_end(key)  # type: ignore[arg-type]
    if cached is None:
        loaded = _read_yaml(Path(path), f"{ENV_VAR}={path!s}" if from_env else str(path))
        if loaded is None:  # an empty file (or only comments) means "all defaults"
            loaded = {}
        if not isinstance(loaded, Mapping):
            raise ConfigError(f"{path}: the top level must be a mapping of config keys; got {type(loaded).__name__}")
        cached = dict(loaded)
        if key is not None:
            with _LOCK:
                _FILES[key] = cached
                while len(_FILES) > _FILES_MAX:
                    _FILES.popitem(last=False)
    return copy.deepcopy(cached), str(path)
