"""Streaming writers for the `workflows` table: JSON Lines, JSON, CSV (safe against formula injection).

Each template carries the transcripts of its videos (tables template_videos and transcripts)."""

import csv
import json
import os
import tempfile

import sqlite_utils

from .errors import ConfigError

FORMATS = ("jsonl", "json", "csv")
JSON_COLUMNS = ("categories", "node_types", "workflow", "images", "videos", "page_og")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")   # what spreadsheets read as the start of a formula
CSV_CELL_MAX = 32_767       # Excel's and LibreOffice's limit of characters in one cell


def rows(conn, live_only=False):
    """The workflows rows (`live_only`: those not removed), one at a time, in id order (never the whole
    table in memory), each with its `transcripts` in the order of its videos."""
    where = " WHERE removed_at IS NULL" if live_only else ""
    for row in sqlite_utils.Database(conn).query(f"SELECT * FROM workflows{where} ORDER BY id"):
        row["transcripts"] = transcripts_of(conn, row)
        yield row


def transcripts_of(conn, row):
    """[{video_id, language_code, is_generated, text}] of one template's stored transcripts."""
    found = {
        r[0]: {"video_id": r[0], "language_code": r[1], "is_generated": bool(r[2]), "text": r[3]}
        for r in conn.execute(
            "SELECT t.video_id, t.language_code, t.is_generated, t.text FROM template_videos AS tv "
            "JOIN transcripts AS t ON t.video_id = tv.video_id WHERE tv.template_id = ?", (row["id"],))
    }
    try:
        order = json.loads(row.get("videos") or "[]")
    except ValueError:
        order = []
    order = [v for v in order if v in found] + sorted(v for v in found if v not in order)
    return [found[v] for v in order]


def csv_transcripts(transcripts):
    """The texts of a template's transcripts in one cell, within the cell limit."""
    return "\n\n".join(t["text"] for t in transcripts)[:CSV_CELL_MAX]


def write(conn, fmt, out, live_only=False):
    """Write every row (`live_only`: those not removed) to the text stream `out`; returns how many."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}.")
    if fmt == "csv":
        columns = [r[1] for r in conn.execute("PRAGMA table_info(workflows)")] + ["transcripts"]
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
        row["transcripts"] = csv_transcripts(row["transcripts"])
        writer.writerow([neutralise(row[c]) for c in columns])
    return n
