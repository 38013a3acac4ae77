"""The disk under a SQLite database: how much is free in its folder (`min_free_mb`, issue 44). One
`os.statvfs`, about a microsecond: the supervisor asks once a second."""

from __future__ import annotations

import os


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
