"""The one way the CLI writes files: no input is ever overwritten, no output is ever torn.

``check_outputs`` runs before anything is read: it refuses an output that is an
input or another output, and an output whose directory cannot be written. Each
output is then written to a temporary file beside it and renamed into place only
once every output of the run is complete (``OutputSet``), so a failure at any
point leaves every previous file as it was.

Paths may be given bare or labelled with the flag that named them, ``("--out", path)``,
so that messages say which flag to change.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from rewardkit.errors import UserError

Labelled = tuple[str, "Path | str"]
PathArg = Path | str | Labelled | None


class OutputError(UserError, ValueError):
    """An output path that must not or cannot be written; the message names the flag and the path."""


def _label(item: Path | str | Labelled, default: str) -> tuple[str, Path]:
    if isinstance(item, tuple):
        return item[0], Path(item[1])
    return default, Path(item)


def _resolve(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a symlink loop: compare as written
        return path.absolute()


def _same(a: Path, b: Path) -> bool:
    """Same file, by resolved path (symlinks followed) or, when both exist, by inode (hard links)."""
    if _resolve(a) == _resolve(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): the resolved paths decided
        return False


def _is_special(path: Path) -> bool:
    """An existing device, FIFO or socket (``-o /dev/null``): written in place, never replaced."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _check_location(flag: str, path: Path) -> None:
    where = f"{flag} {path}"
    try:
        if _is_special(path):
            if not os.access(path, os.W_OK):
                raise OutputError(f"{where} is not writable")
            return
        target = path.resolve()
        if target.is_dir():
            raise OutputError(f"{where} is a directory; give a file path")
        if target.exists() and not os.access(target, os.W_OK):
            raise OutputError(f"{where} exists and is read-only; choose another output path")
        # The nearest existing ancestor decides whether the missing directories can be created.
        ancestor = target.parent
        while not ancestor.exists() and ancestor != ancestor.parent:
            ancestor = ancestor.parent
        if not ancestor.is_dir():
            raise OutputError(f"{where}: {ancestor} is not a directory")
        if not os.access(ancestor, os.W_OK | os.X_OK):
            raise OutputError(f"{where}: directory {ancestor} is not writable")
    except (OSError, RuntimeError) as exc:  # permission denied on a parent, a symlink loop
        raise OutputError(f"{where}: {getattr(exc, 'strerror', None) or exc}") from None


def check_outputs(inputs: Sequence[PathArg], outputs: Sequence[PathArg]) -> None:
    """Refuse, before anything is read, every output that would clobber an input or another output
    or that cannot be written. ``None`` entries (flags not given) are skipped."""
    ins = [_label(i, "input") for i in inputs if i is not None]
    seen: list[tuple[str, Path]] = []
    for flag, path in (_label(o, "output") for o in outputs if o is not None):
        for in_flag, in_path in ins:
            if _same(path, in_path):
                raise OutputError(f"{flag} {path} is also an input ({in_flag} {in_path}); choose another output path")
        for other_flag, other in seen:
            if _same(path, other):
                raise OutputError(f"{flag} {path} is the same file as {other_flag} {other}; choose another output path")
        _check_location(flag, path)
        seen.append((flag, path))


def _default_mode() -> int:
    # NamedTemporaryFile creates 0600; a new output gets what open() would give it (0666 & ~umask).
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def _fsync_dir(directory: Path) -> None:
    """Make the renames durable; best effort, as some platforms cannot open a directory."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # e.g. a filesystem that does not support fsync on directories
        pass
    finally:
        os.close(fd)


class OutputSet:
    """The outputs of one run: each is written to a temporary file beside it, and all are renamed
    into place together by ``commit`` (on leaving the ``with`` block without an exception).
    On any exception every temporary is removed and every previous output is left untouched.
    ``durable``: each is on disk (fsync) before it is renamed; off for outputs derived from others (a page built from
    a log), which a crash can cost but never tear: the rename still puts a whole file in place or none."""

    def __init__(self, durable: bool = True) -> None:
        self._staged: list[tuple[Path, Path]] = []  # (temporary, final path)
        self.durable = durable

    @contextlib.contextmanager
    def open(self, path: Path | str, flag: str = "output") -> Iterator[TextIO]:
        """A UTF-8 text handle on the output's temporary."""
        with self._stage(path, flag, binary=False) as f:
            yield f

    def write_text(self, path: Path | str, text: str, flag: str = "output") -> None:
        with self.open(path, flag) as f:
            f.write(text)

    def write_bytes(self, path: Path | str, data: bytes, flag: str = "output") -> None:
        """A binary output (a PNG rendered in memory), staged like the others."""
        with self._stage(path, flag, binary=True) as f:
            f.write(data)

    @contextlib.contextmanager
    def _stage(self, path: Path | str, flag: str, binary: bool) -> Iterator[Any]:
        path = Path(path)
        mode, encoding = ("wb", None) if binary else ("w", "utf-8")
        try:
            if _is_special(path):  # /dev/null, a FIFO: nothing to tear, and replacing it would be wrong
                with path.open(mode, encoding=encoding) as special:
                    yield special
                return
            target = path.resolve()  # through a symlink: the link stays, its target gets the new content
            if target.is_dir():
                raise OutputError(f"cannot write {flag} {path}: it is a directory; give a file path")
            if target.parent.exists() and not target.parent.is_dir():
                raise OutputError(f"cannot write {flag} {path}: {target.parent} is not a directory")
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed below, kept on disk until commit
                mode, encoding=encoding, dir=target.parent, delete=False, prefix=f".{target.name}.", suffix=".tmp"
            )
            self._staged.append((Path(tmp.name), target))  # registered first: abort removes it whatever happens
            with tmp:
                yield tmp
                tmp.flush()
                if self.durable:
                    os.fsync(tmp.fileno())
            try:
                mode = stat.S_IMODE(target.stat().st_mode)
            except FileNotFoundError:
                mode = _default_mode()
            os.chmod(tmp.name, mode)
        except OSError as exc:
            raise OutputError(f"cannot write {flag} {path}: {exc.strerror or exc}") from None

    def commit(self) -> None:
        target = None
        try:
            for tmp, target in self._staged:
                os.replace(tmp, target)
        except OSError as exc:
            self.abort()
            raise OutputError(f"cannot rename {target} into place: {exc.strerror or exc}") from None
        for directory in {target.parent for _, target in self._staged} if self.durable else ():
            _fsync_dir(directory)
        self._staged.clear()

    def abort(self) -> None:
        for tmp, _ in self._staged:
            tmp.unlink(missing_ok=True)
        self._staged.clear()

    def __enter__(self) -> OutputSet:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.commit()
        else:  # any exception, KeyboardInterrupt included: leave the previous outputs as they were
            self.abort()


@contextlib.contextmanager
def atomic_writer(path: Path | str, flag: str = "output") -> Iterator[TextIO]:
    """A text file that replaces ``path`` only when the block completes."""
    with OutputSet() as outputs, outputs.open(path, flag) as f:
        yield f


def atomic_write_text(path: Path | str, text: str, flag: str = "output") -> None:
    with atomic_writer(path, flag) as f:
        f.write(text)
