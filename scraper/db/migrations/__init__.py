"""The schema of the jobs database: one migration per file of this folder, numbered as applied.

`NNNN_name.sql` brings a database from schema version NNNN - 1 to NNNN: the version a database holds
(`PRAGMA user_version` on SQLite, the `schema_version` table on PostgreSQL) is the number of the last file
it has run. The file is written in SQLite's dialect. PostgreSQL runs it translated statement by statement
(db/dialect.py), unless `NNNN_name.pg.sql` stands beside it: PostgreSQL's own text of the same step, run as
written, for where the two differ in more than that translation (JSON read with jsonb, search on tsvector
instead of FTS5, or nothing to do). Either may hold nothing but comments: that step is the other's alone.

To change the schema, add a file with the next number (`0024_what.sql`, with a comment saying why), and
`0024_what.pg.sql` beside it only if PostgreSQL needs its own text. A file that has shipped is never edited,
not even its spacing (SQLite keeps each CREATE as written): databases out there have run it. `store.migrate`
runs the files a database has not (`pg.migrate` on PostgreSQL); setup.cfg ships them as package data.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import sqlite3
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable

FILE_NAME = re.compile(r"(\d{4})_\w+(\.pg)?\.sql")


@dataclasses.dataclass(frozen=True)
class Migration:
    """One file of this folder (with its PostgreSQL sibling, if any)."""

    version: int            # the schema version of a database that has run it: its file's number
    name: str               # its file's name, without `.sql`
    sqlite: str             # its text in SQLite's dialect
    postgres: str | None    # PostgreSQL's own text, run as written; None: `sqlite`, translated


def load(folder: Traversable) -> tuple[Migration, ...]:
    """The migrations in `folder`, in order. A file that is misnamed, numbered twice or out of sequence, or a
    PostgreSQL text without its base file is refused: it would be skipped, or run in the wrong place."""
    base: dict[int, Traversable] = {}
    own: dict[int, Traversable] = {}
    for entry in folder.iterdir():
        if not entry.name.endswith(".sql"):
            continue
        match = FILE_NAME.fullmatch(entry.name)
        if match is None:
            raise RuntimeError(f"migration file {entry.name} is not named NNNN_name.sql or NNNN_name.pg.sql")
        found = own if match.group(2) else base
        version = int(match.group(1))
        if version in found:
            raise RuntimeError(f"two migration files numbered {version}: {found[version].name}, {entry.name}")
        found[version] = entry
    if sorted(base) != list(range(1, len(base) + 1)):
        raise RuntimeError(f"the migration files are not numbered 1 to {len(base)} without gaps: {sorted(base)}")
    for version, entry in own.items():
        if version not in base:
            raise RuntimeError(f"{entry.name} has no base file {version:04d}_*.sql")
    return tuple(Migration(version, base[version].name.removesuffix(".sql"),
                           base[version].read_text(encoding="utf-8"),
                           own[version].read_text(encoding="utf-8") if version in own else None)
                 for version in sorted(base))


# the schema version the files bring a database to, from their names alone: every command reads it, and only
# one that migrates reads the files (importlib.resources and their text cost a command's start 10 ms)
LATEST = max(int(m.group(1)) for m in map(FILE_NAME.fullmatch, os.listdir(os.path.dirname(__file__)))
             if m is not None and not m.group(2))


@functools.cache
def _shipped() -> tuple[Migration, ...]:
    from importlib import resources
    return load(resources.files(__name__))


def __getattr__(name: str) -> Any:
    """`MIGRATIONS`: every migration of this folder, in order, read the first time it is asked for."""
    if name == "MIGRATIONS":
        return _shipped()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def pending(version: int, target: int) -> list[Migration]:
    """What a database at schema `version` runs, in order, to be at `target`."""
    return [m for m in _shipped() if version < m.version <= target]


def statements(script: str) -> list[str]:
    """Split SQLite's text of a migration into statements (executescript would commit our transaction)."""
    parts, buf = [], []
    for line in script.splitlines():
        buf.append(line)
        if sqlite3.complete_statement("\n".join(buf)):
            parts.append("\n".join(buf).strip())
            buf = []
    return [p for p in parts if p]
