"""One writer per file: an exclusive lock that a second process meets with a one-line error.

``WriterLock(path)`` takes ``fcntl.flock`` on ``<path>.lock`` beside the file (created if missing; it holds
the owner's pid, for the message) and keeps it until ``release``. The kernel drops the lock when its holder
dies, so a killed run never leaves the file locked; a lock file left behind is simply taken over. On
release the lock file is removed while still locked; a process that opened it just before then locks a
removed file, sees that its inode is no longer the path's, and tries again. Without ``fcntl`` (Windows) the
lock is a no-op.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from rewardkit.errors import UserError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]


class LockedError(UserError, ValueError):
    """The file is being written by another process; the message names it and its pid."""


class WriterLock:
    def __init__(self, path: Path | str, choose: str = "another path") -> None:
        """``choose`` ends the message: what the user may change instead of waiting (``another --out-dir``)."""
        self.path = Path(path)
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.choose = choose
        self._fd: int | None = None

    def acquire(self) -> WriterLock:
        if fcntl is None or self._fd is not None:
            return self
        while True:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pid = os.read(fd, 32).decode("ascii", "replace").strip() or "unknown"
                os.close(fd)
                raise LockedError(
                    f"{self.path} is being written by another run (pid {pid}); wait for it or choose {self.choose}"
                ) from None
            except OSError:
                os.close(fd)
                raise
            if _same_file(fd, self.lock_path):
                break
            os.close(fd)  # its holder removed it after we opened it: lock the one at the path now
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            self.lock_path.unlink()
        os.close(self._fd)  # closing drops the flock
        self._fd = None

    def __enter__(self) -> WriterLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:  # an owner that forgot to release (a test): never keep the lock past the object
        with contextlib.suppress(Exception):
            self.release()


def _same_file(fd: int, path: Path) -> bool:
    try:
        mine, theirs = os.fstat(fd), os.stat(path)
    except FileNotFoundError:
        return False
    return (mine.st_dev, mine.st_ino) == (theirs.st_dev, theirs.st_ino)
