"""Who holds a SQLite database (issue 44): the processes with a lock on its file or its WAL index (`-shm`), read
from the kernel's table of locks (/proc/locks, Linux), and what each lock means to SQLite, so that a run kept
waiting, and `status`, can name the reader that keeps the WAL from being checkpointed or the outsider that
holds the write lock. Nothing here is SQL; where /proc cannot be read the answer is an empty list."""

from __future__ import annotations

import fcntl
import os
import struct
from dataclasses import dataclass

# SQLite's locks in the `-shm` file (os_unix.c: UNIX_SHM_BASE, then one byte per lock, then the DMS byte that
# every connection holds shared while it has the database open)
SHM_BASE = 120
WRITE, CHECKPOINT, RECOVER = SHM_BASE, SHM_BASE + 1, SHM_BASE + 2
READ_MARKS = range(SHM_BASE + 3, SHM_BASE + 8)
COMMAND_CHARS = 80


# the main file's lock bytes (os_unix.c: PENDING_BYTE 0x40000000, then RESERVED, then 510 SHARED bytes)
LOCK_BYTES = (0x40000000, 512)
# Linux's struct flock: l_type, l_whence (short), padding, l_start, l_len (off_t), l_pid (pid_t), padding
_FLOCK = "hh4xqqi4x"


def contended(db_path: str) -> bool:
    """Whether another process holds more than the database open: a read transaction, the write lock, a
    checkpoint (the `-shm`'s lock bytes) or a lock of the main file. F_GETLK asks the kernel for these bytes
    alone (our own locks never conflict), where /proc/locks lists every lock of the machine: its first read
    in a process took 10-15 ms here, which `status` paid with nothing to show."""
    for suffix, (start, length) in (("-shm", (SHM_BASE, 8)), ("", LOCK_BYTES)):
        try:
            fd = os.open(db_path + suffix, os.O_RDONLY)
        except OSError:
            continue
        try:
            asked = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, start, length, 0)
            if struct.unpack(_FLOCK, fcntl.fcntl(fd, fcntl.F_GETLK, asked))[0] != fcntl.F_UNLCK:
                return True
        except OSError:
            return True     # cannot tell: look in /proc/locks
        finally:
            os.close(fd)
    return False


@dataclass(frozen=True, order=True)
class Holder:
    """A process holding the database: `holds` says what (SQLite's meaning of its lock)."""

    pid: int
    holds: str
    command: str

    def __str__(self) -> str:
        return f"pid {self.pid} ({self.command}), which holds {self.holds}"


def holders(db_path: str, exclude: frozenset[int] | set[int] = frozenset(), locks: str | None = None) -> list[Holder]:
    """Every process but `exclude` with a lock on the database or its `-shm`, the strongest lock of each first
    (`locks`: the text of /proc/locks, read when not given)."""
    files = {}
    for suffix in ("", "-shm"):
        try:
            st = os.stat(db_path + suffix)
        except OSError:
            continue
        files[(os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)] = suffix
    if locks is None:
        try:
            with open("/proc/locks") as f:
                locks = f.read()
        except OSError:
            return []
    found: dict[int, tuple[int, str]] = {}
    for line in locks.splitlines():
        parts = line.split()
        if len(parts) < 8 or parts[1] == "->":      # a waiter ("->") holds nothing yet
            continue
        access, pid_text, dev, start = parts[3], parts[4], parts[5], parts[6]
        try:
            major, minor, inode = dev.split(":")
            key = (int(major, 16), int(minor, 16), int(inode))
            pid = int(pid_text)
        except ValueError:
            continue
        if key not in files or pid <= 0 or pid in exclude:
            continue
        rank, holds = _meaning(files[key], access, int(start) if start.isdigit() else -1)
        if pid not in found or rank < found[pid][0]:
            found[pid] = (rank, holds)
    return sorted((Holder(pid, holds, command(pid)) for pid, (rank, holds) in found.items()),
                  key=lambda h: (_rank_of(h.holds), h.pid))


# what a process holds, the strongest first
EXCLUSIVE = "the database locked for itself (locking_mode exclusive)"
WRITER = "the write lock"
READER = "a read transaction (the WAL cannot be checkpointed past it)"
CHECKPOINTER = "a checkpoint"
OPEN = "the database open"
_MEANINGS = (EXCLUSIVE, WRITER, READER, CHECKPOINTER, OPEN)


def _meaning(suffix: str, access: str, start: int) -> tuple[int, str]:
    """(rank, meaning) of one lock: a lower rank matters more."""
    if suffix == "":
        # on the file itself, a WAL database's connections take only shared locks: an exclusive one is a
        # connection in locking_mode exclusive (or a database not in WAL mode, writing)
        return (0, _MEANINGS[0]) if access == "WRITE" else (4, _MEANINGS[4])
    if start == WRITE and access == "WRITE":
        return 1, _MEANINGS[1]
    if start in READ_MARKS and access == "READ":
        return 2, _MEANINGS[2]
    if start in (CHECKPOINT, RECOVER):
        return 3, _MEANINGS[3]
    return 4, _MEANINGS[4]


def _rank_of(holds: str) -> int:
    return _MEANINGS.index(holds)


def command(pid: int) -> str:
    """The process's command line, shortened ("?" when it is gone or hidden)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            text = " ".join(f.read().replace(b"\0", b" ").decode("utf-8", "replace").split())    # one line
    except OSError:
        return "?"
    return text if len(text) <= COMMAND_CHARS else text[:COMMAND_CHARS - 3] + "..."


def described(db_path: str, exclude: frozenset[int] | set[int] = frozenset()) -> str:
    """`by pid 1234 (sqlite3 jobs.db), which holds the write lock`, for a sentence; "" when none is known."""
    found = [h for h in holders(db_path, exclude) if _rank_of(h.holds) < 4]
    return " by " + "; ".join(str(h) for h in found) if found else ""
