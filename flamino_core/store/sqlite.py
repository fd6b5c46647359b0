"""The result store's SQLite file: its tables, opening it (a file SQLite cannot read is moved
aside), transactions, and queries whose cursors are always finished.

Why finished cursors matter: in WAL mode a connection with an unfinished SELECT keeps an old
snapshot open, and a later write on that connection fails at once with "database is locked"
(SQLITE_BUSY_SNAPSHOT, which no busy timeout waits out) as soon as another process has
committed. Every read here is ``fetchall()``-ed, so no statement outlives its call.
"""

from __future__ import annotations

import logging
import sqlite3
import time
import zlib
from pathlib import Path

LOG = logging.getLogger("flamino")
SCHEMA_VERSION = 1
BUSY_TIMEOUT_SECONDS = 60.0  # how long a writer waits for another process's write to finish

SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY,
    model TEXT NOT NULL,
    sequence BLOB NOT NULL,       -- SHA-256 of the sequence
    length INTEGER NOT NULL,
    used REAL NOT NULL,           -- last use, seconds since the epoch
    bytes INTEGER NOT NULL,       -- size of its values
    UNIQUE (model, sequence)
);
CREATE INDEX IF NOT EXISTS entries_used ON entries (used);
CREATE TABLE IF NOT EXISTS masked (
    entry INTEGER NOT NULL,
    position INTEGER NOT NULL,    -- 0-based residue index
    value BLOB NOT NULL,          -- float32 log-probabilities over the vocabulary
    crc INTEGER NOT NULL,
    PRIMARY KEY (entry, position)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS outputs (
    entry INTEGER NOT NULL,
    name TEXT NOT NULL,
    dtype TEXT NOT NULL,
    shape TEXT NOT NULL,          -- comma-separated dimensions
    value BLOB NOT NULL,
    crc INTEGER NOT NULL,
    PRIMARY KEY (entry, name)
) WITHOUT ROWID;
-- SUM(entries.bytes), kept by triggers in the transaction that changes it: eviction reads one
-- row after every write (the SUM itself scans every entry: 36 ms at 50,000 entries, measured).
CREATE TABLE IF NOT EXISTS totals (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    bytes INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS entries_added AFTER INSERT ON entries
BEGIN UPDATE totals SET bytes = bytes + NEW.bytes WHERE id = 0; END;
CREATE TRIGGER IF NOT EXISTS entries_resized AFTER UPDATE OF bytes ON entries
BEGIN UPDATE totals SET bytes = bytes + NEW.bytes - OLD.bytes WHERE id = 0; END;
CREATE TRIGGER IF NOT EXISTS entries_dropped AFTER DELETE ON entries
BEGIN UPDATE totals SET bytes = bytes - OLD.bytes WHERE id = 0; END;
INSERT OR IGNORE INTO totals (id, bytes) SELECT 0, COALESCE(SUM(bytes), 0) FROM entries;
"""


def open_database(path: Path) -> sqlite3.Connection:
    """A connection to the store at ``path`` (created with its folder), in WAL mode.

    A file SQLite cannot read as a store (damaged, a copy cut short, some other file) is moved
    to ``<name>.damaged-<time>`` for a post-mortem, and a new store is started.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        return _connect(path)
    except sqlite3.DatabaseError as err:
        if isinstance(err, sqlite3.OperationalError) and "locked" in str(err):
            raise
        aside = path.with_name(f"{path.name}.damaged-{int(time.time())}")
        LOG.warning("result store %s is unreadable (%s); moved to %s", path, err, aside)
        for suffix in ("", "-wal", "-shm"):
            source = Path(str(path) + suffix)
            if source.exists():
                source.replace(Path(str(aside) + suffix))
        return _connect(path)


def _connect(path: Path) -> sqlite3.Connection:
    # isolation_level=None: no implicit transactions; ``Transaction`` opens them explicitly.
    connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
    try:
        rows(connection, "PRAGMA journal_mode=WAL")  # readers never wait for the writer
        # NORMAL in WAL mode: a killed process loses nothing committed; only a power cut can
        # lose the last commits, which are then simply recomputed.
        rows(connection, "PRAGMA synchronous=NORMAL")
        version = rows(connection, "PRAGMA user_version")[0][0]
        if version not in (0, SCHEMA_VERSION):
            raise sqlite3.DatabaseError(f"store schema {version}; this flamino reads {SCHEMA_VERSION}")
        # IF NOT EXISTS: a no-op on an existing store; one transaction, so a store made before the
        # totals row gets it counted from its entries while no other process writes.
        connection.executescript(f"BEGIN IMMEDIATE;\n{SCHEMA}\nCOMMIT;")
        rows(connection, f"PRAGMA user_version={SCHEMA_VERSION}")
        if rows(connection, "PRAGMA quick_check")[0][0] != "ok":
            raise sqlite3.DatabaseError("quick_check failed")
    except BaseException:
        connection.close()
        raise
    return connection


def rows(connection: sqlite3.Connection, sql: str, args: tuple = ()) -> list[tuple]:
    """Every row of one statement, its cursor finished and closed (see the module docstring)."""
    cursor = connection.execute(sql, args)
    try:
        return cursor.fetchall()
    finally:
        cursor.close()


def execute(connection: sqlite3.Connection, sql: str, args: tuple = ()) -> int:
    """One writing statement; the number of rows it changed."""
    cursor = connection.execute(sql, args)
    try:
        return cursor.rowcount
    finally:
        cursor.close()


class Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on any exception): the write lock is
    taken at the start, waiting up to the busy timeout for another writer, and everything in
    the block is kept or nothing is."""

    def __init__(self, connection: sqlite3.Connection):
        self.connection = connection

    def __enter__(self) -> sqlite3.Connection:
        execute(self.connection, "BEGIN IMMEDIATE")
        return self.connection

    def __exit__(self, kind, value, traceback) -> bool:
        execute(self.connection, "COMMIT" if kind is None else "ROLLBACK")
        return False


def checksum(*parts: bytes) -> int:
    """CRC-32 over a value's key and bytes: a value read back under another key, or with a
    flipped bit, fails it."""
    crc = 0
    for part in parts:
        crc = zlib.crc32(part, crc)
    return crc
