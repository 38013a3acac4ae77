"""The disk under a SQLite database: how much is free in its folder (`min_free_mb`, issue 44), and whether an
error met writing there means the disk is full. One `os.statvfs`, 4 us: the supervisor asks at every tick of
its loop (20 times a second), so a run overshoots its floor by at most 50 ms of writes."""

from __future__ import annotations

import errno
import os

from scraper.base.errors import DatabaseError, DiskFull
from scraper.base.urls import is_db_url

FULL_MB = 1.0   # with less than this free, an I/O error writing the database is the disk's being full
# a run keeps this much allocated beside the database (`<db>-reserve`) and lets it go when the disk fills, so
# that its last writes (every running job handed back, the run's end) fit; measured: 40 jobs' hand-back and the
# runs row take under 100 KB of WAL
RESERVE_MB = 2


def folder(db_path: str) -> str:
    """The folder the database, its WAL and its sibling files live in."""
    return os.path.dirname(os.path.abspath(db_path))


def free_mb(db_path: str) -> float:
    """MB an unprivileged process may still write in the database's folder (what SQLite may use)."""
    st = os.statvfs(folder(db_path))
    return st.f_bavail * st.f_frsize / 2**20


def under_floor(db_path: str, floor_mb: float) -> str | None:
    """One sentence when the disk under the database has less than `floor_mb` free, else None."""
    if floor_mb <= 0:
        return None
    free = free_mb(db_path)
    if free >= floor_mb:
        return None
    return (f"the disk under {folder(db_path)} has {free:.1f} MB free, under min_free_mb ({floor_mb:g} MB)")


def exhausted(db_path: str, error: BaseException) -> bool:
    """Whether `error`, met writing the database or a file beside it, means its disk is full: SQLite's
    SQLITE_FULL, ENOSPC, or an I/O error while less than FULL_MB is free (SQLite reports a failed write of its
    WAL index, or of a new file's header, as a "disk I/O error")."""
    if isinstance(error, DiskFull) or getattr(error, "errno", None) == errno.ENOSPC:
        return True
    if is_db_url(db_path) or not isinstance(error, (OSError, DatabaseError)):
        return False
    try:
        return free_mb(db_path) < FULL_MB
    except OSError:
        return False


def reserve(path: str) -> bool:
    """Allocate the reserve file at `path` (really allocated: a sparse file would hold no space); False when
    the disk cannot spare it (the run then goes on without)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    except OSError:
        return False
    try:
        os.posix_fallocate(fd, 0, RESERVE_MB * 2**20)
        return True
    except OSError:
        os.ftruncate(fd, 0)
        return False
    finally:
        os.close(fd)


def let_go(path: str) -> None:
    """Give the reserve's space back to the disk (for a run's last writes)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
