"""Result files appear whole or not at all; our own lock and log files are opened without following links."""

from __future__ import annotations

import contextlib
import os
import stat
import uuid
from pathlib import Path
from typing import Iterator

TEMPORARY_MARK = ".tmp-"  # in the names of files being written: ``.<name>.tmp-<random>``


@contextlib.contextmanager
def written_atomically(path: str | os.PathLike, *, durable: bool = False) -> Iterator[Path]:
    """A temporary path beside ``path``, renamed to ``path`` only when the block succeeds.

    An interrupted or failed run never leaves a truncated file that looks like a result;
    the temporary file is removed on failure (a killed process leaves ``.<name>.tmp-*``,
    never taken for a result).

    Args:
      path: the file to write.
      durable: flush the file to disk before it gets its name (a file that exists after a
        crash of the machine is then complete too).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}{TEMPORARY_MARK}{uuid.uuid4().hex}")
    try:
        yield tmp
        if durable:
            with open(tmp, "rb") as handle:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


_OPEN_FLAGS = {"r": os.O_RDONLY, "w": os.O_WRONLY | os.O_CREAT, "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND}


def open_own_file(path: str | os.PathLike, mode: str):
    """A regular file of our own opened as text, never through a link: ``"r"``, ``"w"`` (created
    if missing, not truncated: for lock files) or ``"a"`` (append).

    ``O_NOFOLLOW`` refuses a symbolic link planted at ``path`` (a lock or log file in a shared
    folder pointed at someone's file was truncated or appended to), and a path that is not a
    regular file (a pipe, a device) is refused too. Raises ``OSError``.
    """
    fd = os.open(path, _OPEN_FLAGS[mode] | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{os.fspath(path)} is not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, mode)
    except BaseException:
        os.close(fd)
        raise
