"""`export --source NAME`: a catalogue source's items as JSON Lines, JSON, CSV or Parquet.

Each row carries source, key (`SOURCE:PATH`), url, version, first_seen_at, last_seen_at, removed_at and
record (the merged fields). JSON and JSON Lines nest `record`; CSV and Parquet give one column per
record field, named `record.<field>` (a field that is an object or a list is its JSON text there).
Items are public pages, so nothing is redacted.
"""

import csv
import json

from scraper.base.errors import ConfigError
from scraper.db import items
from scraper.products import output
from scraper.products.export import FORMATS, Summary, fit_cell, neutralise

BASE = items.EXPORTED
PREFIX = "record."


def check_source(conn, source):
    """ConfigError (one sentence) when the database holds no item of `source`."""
    if not items.has_source(conn, source):
        known = items.sources(conn)
        raise ConfigError(f"no item of source {source!r} is stored; the sources with items are "
                          f"{', '.join(known) or '(none yet)'}.")


def fields(conn, source):
    """The record's fields across the source's items, sorted."""
    return items.fields(conn, source)


def rows(conn, source, live_only=False):
    """The items of `source` in key order, one at a time, `record` decoded."""
    for r in items.exported(conn, source, live_only):
        row = {c: r[c] for c in BASE}
        row["key"] = f"{r['source']}:{r['key']}"
        row["record"] = json.loads(r["record"])
        yield row


def flat(row, names):
    """The row with one `record.<field>` column per field name; objects and lists as JSON text."""
    out = {c: row[c] for c in BASE}
    for name in names:
        value = row["record"].get(name)
        out[PREFIX + name] = value if value is None or isinstance(value, (str, int, float)) \
            else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return out


def write(conn, fmt, out, source, live_only=False):
    """Write the items of `source` to the text stream `out`; returns a Summary."""
    if fmt == "parquet":
        raise ConfigError("--format parquet needs --output FILE (Parquet is a binary file, not a stream).")
    summary = Summary()
    if fmt in ("jsonl", "json"):
        first = True
        out.write("[" if fmt == "json" else "")
        for row in rows(conn, source, live_only):
            summary.rows += 1
            text = json.dumps(row, ensure_ascii=False)
            if fmt == "jsonl":
                out.write(text + "\n")
            else:
                out.write(("\n" if first else ",\n") + text)
                first = False
        if fmt == "json":
            out.write("]\n" if first else "\n]\n")
        return summary
    names = fields(conn, source)
    columns = [*BASE, *(PREFIX + n for n in names)]
    writer = csv.writer(out)
    writer.writerow(columns)
    for row in rows(conn, source, live_only):
        summary.rows += 1
        cells = []
        for cell in flat(row, names).values():
            cell, cut = fit_cell(neutralise(cell))
            summary.cut_cells += cut
            cells.append(cell)
        writer.writerow(cells)
    return summary


def write_file(conn, fmt, path, source, live_only=False):
    """Write to `path` through a temporary file beside it, so a reader never sees half an export."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}.")
    output.check_folder(path, "export")
    if fmt == "parquet":
        from scraper.products import parquet
        parquet.require()
        with output.atomic_path(path, "export") as tmp:
            names = fields(conn, source)
            columns = [*BASE, *(PREFIX + n for n in names)]
            summary = Summary()

            def counted():
                for row in rows(conn, source, live_only):
                    summary.rows += 1
                    yield flat(row, names)
            summary.bad_dates = parquet.write(counted(), tmp, columns, {"version": "INTEGER"})
        return summary
    with output.atomic(path, what="export") as out:
        return write(conn, fmt, out, source, live_only)
