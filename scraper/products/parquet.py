"""The Parquet export: a typed schema, lists as Parquet lists, written in row groups with pyarrow.

pyarrow is the optional extra `parquet` (`pip install 'scraper[parquet]'`); this module imports it only
when a Parquet export is asked for. Memory holds one row group at a time, whatever the row count.
"""

import datetime
import json
import logging

from scraper.base.errors import ConfigError

log = logging.getLogger(__name__)

ROW_GROUP_ROWS = 200          # rows per row group; a workflow is ~10-50 KB, so a group is ~2-10 MB of text
ROW_GROUP_BYTES = 64 << 20    # ...and a group is closed early past this much text (a few 2 MB workflows)
COMPRESSION = "zstd"          # read by pandas, polars, duckdb and Spark; smaller than snappy for JSON text

# the type of each known column; a column this does not know takes the type SQLite declares for it
LISTS = ("categories", "node_types", "images", "videos")
TIMESTAMPS = ("created_at", "fetched_at", "first_seen_at", "last_seen_at", "removed_at")
INTEGERS = ("id", "node_count", "total_views", "quality_score")
MAPS = ("page_og",)
BOOLEANS = ("paid", "hollow")     # 1/0 in the database (paid NULL: never listed)
TRANSCRIPTS = "transcripts"   # [{video_id, language_code, is_generated, text}]: a list of structs
# `workflow` stays JSON text: its shape differs from node to node, no fixed schema can hold it


def require():
    """ConfigError with the install command when pyarrow is missing."""
    try:
        import pyarrow.parquet  # noqa: F401 - only checking that pyarrow can be imported
    except ImportError:
        raise ConfigError("--format parquet needs pyarrow, which is not installed; "
                          "install it with: pip install 'scraper[parquet]'.") from None


def schema(columns, declared=None):
    """The pyarrow schema of an export of `columns`; `declared`: {column: SQLite declared type}."""
    import pyarrow as pa

    declared = declared or {}
    fields = []
    for c in columns:
        if c in LISTS:
            t = pa.list_(pa.string())
        elif c in TIMESTAMPS:
            t = pa.timestamp("ms", tz="UTC")
        elif c in INTEGERS:
            t = pa.int64()
        elif c in BOOLEANS:
            t = pa.bool_()
        elif c in MAPS:
            t = pa.map_(pa.string(), pa.string())
        elif c == TRANSCRIPTS:
            t = pa.list_(pa.struct([("video_id", pa.string()), ("language_code", pa.string()),
                                    ("is_generated", pa.bool_()), ("text", pa.string())]))
        else:
            t = {"INTEGER": pa.int64(), "REAL": pa.float64()}.get((declared.get(c) or "").upper(), pa.string())
        fields.append(pa.field(c, t, nullable=c != "id"))
    return pa.schema(fields)


def write(rows, path, columns, declared=None):
    """Write the decoded rows to `path` in row groups; returns how many dates could not be read (left
    null). The caller renames the file into place."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    sch = schema(columns, declared)
    bad = [0]
    convert = {f.name: _converter(f.type, bad) for f in sch}
    with pq.ParquetWriter(path, sch, compression=COMPRESSION) as writer:
        batch, size, groups = {c: [] for c in columns}, 0, 0
        for row in rows:
            for c in columns:
                value = convert[c](row.get(c))
                batch[c].append(value)
                if isinstance(value, str):
                    size += len(value)
            if len(batch[columns[0]]) >= ROW_GROUP_ROWS or size >= ROW_GROUP_BYTES:
                writer.write_table(pa.table(batch, schema=sch), row_group_size=ROW_GROUP_ROWS)
                batch, size, groups = {c: [] for c in columns}, 0, groups + 1
        if batch[columns[0]] or not groups:         # an empty export is still a valid file, with its schema
            writer.write_table(pa.table(batch, schema=sch))
    if bad[0]:
        log.warning("%d date(s) were not ISO 8601 and were left empty in %s", bad[0], path)
    return bad[0]


def _converter(arrow_type, bad):
    import pyarrow as pa

    if pa.types.is_list(arrow_type) and pa.types.is_struct(arrow_type.value_type):
        return lambda v: v      # already a list of dicts with the struct's fields
    if pa.types.is_list(arrow_type):
        return lambda v: None if v is None else [x if isinstance(x, str) else json.dumps(x) for x in v]
    if pa.types.is_map(arrow_type):
        return lambda v: None if v is None else [(str(k), x if isinstance(x, str) else json.dumps(x))
                                                  for k, x in v.items()]
    if pa.types.is_timestamp(arrow_type):
        def timestamp(v):
            if v is None:
                return None
            parsed = _timestamp(v)
            if parsed is None:
                bad[0] += 1
            return parsed
        return timestamp
    if pa.types.is_string(arrow_type):
        return lambda v: v if v is None or isinstance(v, str) else json.dumps(v, ensure_ascii=False,
                                                                              separators=(",", ":"))
    return lambda v: v


def _timestamp(text):
    """An aware UTC datetime from ISO 8601 text (`Z` or an offset; none means UTC); None if unreadable."""
    try:
        t = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.timezone.utc)
    return t.astimezone(datetime.timezone.utc)
