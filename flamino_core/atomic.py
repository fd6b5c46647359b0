"""Result files appear whole or not at all."""

from __future__ import annotations

import contextlib
import os
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
