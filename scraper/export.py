"""Streaming writers for the `workflows` table: JSON Lines, JSON, CSV (safe against formula injection)."""

import csv
import json
import os
import tempfile

import sqlite_utils

from .errors import ConfigError

FORMATS = ("jsonl", "json", "csv")
JSON_COLUMNS = ("categories", "node_types", "workflow", "images", "videos", "page_og")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")   # what spreadsheets read as the start of a formula


def rows(conn, live_only=False):
    """The workflows rows, one at a time, in id order (never the whole table in memory)."""
    where = " WHERE removed_at IS NULL" if live_only else ""
    return sqlite_utils.Database(conn).query(f"SELECT * FROM workflows{where} ORDER BY id")


def write(conn, fmt, out, live_only=False):
    """Write every row (`live_only`: those not removed) to the text stream `out`; returns how many."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}.")
    if fmt == "csv":
        columns = [r[1] for r in conn.execute("PRAGMA table_info(workflows)")]
        return _csv(rows(conn, live_only), out, columns)
    return {"jsonl": _jsonl, "json": _json}[fmt](rows(conn, live_only), out)


def write_file(conn, fmt, path, live_only=False):
    """Write to `path` through a temporary file beside it, so a reader never sees half an export."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ConfigError(f"the output folder {folder} does not exist.")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".export-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            n = write(conn, fmt, out, live_only)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)     # mkstemp makes it 0600; an export is an ordinary file
        os.replace(tmp, path)
        return n
    except BaseException:
        os.unlink(tmp)
        raise


def neutralise(cell):
    """A CSV cell a spreadsheet will show as text, never run as a formula (OWASP's advice)."""
    if isinstance(cell, str) and cell.startswith(FORMULA_START):
        return "'" + cell
    return cell


def _decoded(row):
    for col in JSON_COLUMNS:
        if isinstance(row.get(col), str):
            row[col] = json.loads(row[col])
    return row


def _jsonl(rows, out):
    n = 0
    for n, row in enumerate(rows, 1):
        out.write(json.dumps(_decoded(row), ensure_ascii=False) + "\n")
    return n


def _json(rows, out):
    out.write("[")
    n = 0
    for n, row in enumerate(rows, 1):
        out.write(("\n" if n == 1 else ",\n") + json.dumps(_decoded(row), ensure_ascii=False))
    out.write("\n]\n" if n else "]\n")
    return n


def _csv(rows, out, columns):
    writer = csv.writer(out)
    writer.writerow(columns)    # a header even when there is no row yet
    n = 0
    for n, row in enumerate(rows, 1):
        writer.writerow([neutralise(row[c]) for c in columns])
    return n
