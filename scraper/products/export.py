"""Streaming writers for the `workflows` table: JSON Lines, JSON, CSV (safe against formula injection and
within a spreadsheet's cell limit) and Parquet, with credentials redacted unless asked otherwise.

Each template carries the transcripts of its videos (tables template_videos and transcripts)."""

import csv
import json
from dataclasses import dataclass

from scraper.base.errors import ConfigError
from scraper.db import exports, schema
from scraper.products import output

FORMATS = ("jsonl", "json", "csv", "parquet")
JSON_COLUMNS = ("categories", "node_types", "workflow", "images", "videos", "page_og")
FLAGS = ("paid", "hollow")      # 1/0 in the database, true/false in JSON and Parquet (paid null: never listed)
# bookkeeping of redaction decided at store time (policy/redact.decided), never exported
VERDICT, SAVED = "clean_at_rules", "redacted"
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")   # what spreadsheets read as the start of a formula
CSV_LEFT_OUT = ("workflow",)  # up to 2 MB of JSON: in CSV only when --columns names it (then cut if too long)
CSV_CELL_MAX = 32_767        # Excel's limit, in UTF-16 code units; LibreOffice and Google Sheets allow more
CUT_MARK = "…[cut: {n:,} more characters; export json, jsonl or parquet for the whole value]"


@dataclass
class Summary:
    """What an export did: rows written, values redacted (in how many rows), CSV cells cut, dates that
    Parquet could not read as timestamps (left empty)."""

    rows: int = 0
    redacted: int = 0
    redacted_rows: int = 0
    cut_cells: int = 0
    bad_dates: int = 0

    def describe(self, redact=True):
        """One line for stderr: the redaction count always, the rest when it happened."""
        parts = [f"redacted {self.redacted} value(s) in {self.redacted_rows} workflow(s)" if redact
                 else "not redacted (--no-redact): the workflows are as stored"]
        if self.cut_cells:
            parts.append(f"{self.cut_cells} CSV cell(s) over {CSV_CELL_MAX:,} characters cut with a visible mark")
        if self.bad_dates:
            parts.append(f"{self.bad_dates} date(s) that are not ISO 8601 left empty")
        return "; ".join(parts) + "."


TRANSCRIPTS = "transcripts"    # not a column of workflows: gathered from template_videos and transcripts


def table_columns(conn):
    """The exported columns: those of `workflows` in table order (but the bookkeeping), then `transcripts`."""
    return [c for c in schema.column_names(conn, "workflows") if c not in (VERDICT, SAVED)] + [TRANSCRIPTS]


def choose_columns(conn, wanted, fmt=None):
    """The columns to export: the comma-separated `wanted`, in the order given; by default all of them
    (for CSV all but the workflow JSON)."""
    every = table_columns(conn)
    if wanted is None:
        return [c for c in every if c not in CSV_LEFT_OUT] if fmt == "csv" else every
    chosen = [c.strip() for c in wanted.split(",") if c.strip()]
    unknown = [c for c in chosen if c not in every]
    if unknown or not chosen:
        raise ConfigError(f"unknown column(s) {', '.join(map(repr, unknown)) or '(none given)'} in --columns; "
                          f"the columns are {', '.join(every)}.")
    return list(dict.fromkeys(chosen))


def rows(conn, columns=None, live_only=False, verdict=False, ids=None):
    """The workflows rows (`live_only`: those not removed from n8n.io; `ids`: those templates only), one at a
    time, in id order (never the whole table in memory), each with its `transcripts` in the order of its
    videos (when `columns` holds it; by default it does); `verdict`: each with its stored VERDICT and SAVED
    too (for `_prepared`)."""
    columns = columns or table_columns(conn)
    stored = [c for c in columns if c != TRANSCRIPTS]
    with_transcripts = TRANSCRIPTS in columns
    # the transcripts come in the order of the template's videos: read them even when not exported
    extra = [VERDICT, SAVED] if verdict else []
    select = stored + (["videos"] if with_transcripts and "videos" not in stored else []) + extra
    for row in exports.workflows(conn, select, live_only, ids):
        if with_transcripts:
            row[TRANSCRIPTS] = transcripts_of(conn, row)
        yield {c: row[c] for c in columns + extra}


def records(conn, ids):
    """The templates `ids` as JSON Lines gives them (every column, credentials redacted, JSON decoded), in
    id order: `scraper tap`'s records."""
    return _prepared(rows(conn, None, verdict=True, ids=ids), True, Summary(), decode=True)


def transcripts_of(conn, row):
    """[{video_id, language_code, is_generated, text}] of one template's stored transcripts."""
    found = {
        r[0]: {"video_id": r[0], "language_code": r[1], "is_generated": bool(r[2]), "text": r[3]}
        for r in exports.transcripts(conn, row["id"])
    }
    try:
        order = json.loads(row.get("videos") or "[]")
    except ValueError:
        order = []
    order = [v for v in order if v in found] + sorted(v for v in found if v not in order)
    return [found[v] for v in order]


def csv_transcripts(transcripts):
    """The texts of a template's transcripts in one cell, within the cell limit (cut with the mark)."""
    return fit_cell("\n\n".join(t["text"] for t in transcripts))[0]


def write(conn, fmt, out, columns=None, redact=True, live_only=False):
    """Write every row (`live_only`: those not removed) to the text stream `out`; returns a Summary.
    `columns`: a list from choose_columns (default all)."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}.")
    if fmt == "parquet":
        raise ConfigError("--format parquet needs --output FILE (Parquet is a binary file, not a stream).")
    columns = columns or choose_columns(conn, None, fmt)
    summary = Summary()
    source = _prepared(rows(conn, columns, live_only, verdict=True), redact, summary, decode=fmt != "csv")
    if fmt == "csv":
        _csv(source, out, columns, summary)
    else:
        {"jsonl": _jsonl, "json": _json}[fmt](source, out)
    return summary


def write_file(conn, fmt, path, columns=None, redact=True, live_only=False):
    """Write to `path` through a temporary file beside it, so a reader never sees half an export."""
    output.check_folder(path, "export")
    if fmt == "parquet":
        from scraper.products import parquet  # pyarrow is an optional extra: import it only when asked for
        parquet.require()
        with output.atomic_path(path, "export") as tmp:
            columns = columns or table_columns(conn)
            summary = Summary()
            types = dict(schema.columns(conn, "workflows"))
            # the workflow stays JSON text in Parquet: no need to decode it
            source = _prepared(rows(conn, columns, live_only, verdict=True), redact, summary, decode=True,
                               keep_text=("workflow",))
            summary.bad_dates = parquet.write(source, tmp, columns, types)
        return summary
    with output.atomic(path, what="export") as out:
        return write(conn, fmt, out, columns, redact, live_only)


def neutralise(cell):
    """A CSV cell a spreadsheet will show as text, never run as a formula (OWASP's advice)."""
    if isinstance(cell, str) and cell.startswith(FORMULA_START):
        return "'" + cell
    return cell


def fit_cell(cell, limit=CSV_CELL_MAX):
    """(cell, cut?): a text cell longer than `limit` UTF-16 code units (what Excel counts) is cut to fill
    the limit, ending with a mark that says how much is missing; a shorter one is returned as it is."""
    if not isinstance(cell, str) or len(cell) * 2 <= limit:     # cheap: no string has more units than 2x
        return cell, False
    units = cell.encode("utf-16-le")
    if len(units) // 2 <= limit:
        return cell, False
    mark = CUT_MARK.format(n=len(cell))
    for _ in range(3):      # the mark's length depends on the count it shows: settle it
        kept = units[: (limit - len(mark)) * 2].decode("utf-16-le", "ignore")   # "ignore": half a pair
        fitted = CUT_MARK.format(n=len(cell) - len(kept))
        if len(fitted) == len(mark):
            break
        mark = fitted
    return kept + fitted, True


def _prepared(source, redact, summary, decode, keep_text=()):
    """The rows (with their VERDICT and SAVED, which are dropped) with secrets redacted and JSON columns
    decoded (`decode`, but not those in `keep_text`), counting into `summary`. What was decided when the
    row was stored, under the current rules, is used as it is: a clean row is not redacted again, a row
    with secrets gets its saved redacted columns; any other row is redacted here."""
    if redact:
        from scraper.policy import redact as redaction  # imported when used: its patterns are compiled at import
    decoded = [c for c in JSON_COLUMNS if c not in keep_text] if decode else []
    for row in source:
        summary.rows += 1
        verdict, saved = row.pop(VERDICT), row.pop(SAVED)
        if redact and verdict != redaction.RULES_VERSION:
            n = redaction.restore(row, saved)
            if n is None:
                n = redaction.stored(row, as_text=not decode or "workflow" in keep_text)
            summary.redacted += n
            summary.redacted_rows += bool(n)
        for col in decoded:
            if isinstance(row.get(col), str):
                row[col] = json.loads(row[col])
        if decode:
            for col in FLAGS:
                if row.get(col) is not None:
                    row[col] = bool(row[col])
        yield row


def _jsonl(rows, out):
    for row in rows:
        out.write(json.dumps(row, ensure_ascii=False) + "\n")


def _json(rows, out):
    out.write("[")
    first = True
    for row in rows:
        out.write(("\n" if first else ",\n") + json.dumps(row, ensure_ascii=False))
        first = False
    out.write("]\n" if first else "\n]\n")


def _csv(rows, out, columns, summary):
    writer = csv.writer(out)
    writer.writerow(columns)    # a header even when there is no row yet
    for row in rows:
        if TRANSCRIPTS in row:
            row[TRANSCRIPTS] = "\n\n".join(t["text"] for t in row[TRANSCRIPTS])
        cells = []
        for c in columns:
            cell, cut = fit_cell(neutralise(row[c]))
            summary.cut_cells += cut
            cells.append(cell)
        writer.writerow(cells)
