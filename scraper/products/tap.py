"""`scraper tap` (and `tap-scraper`, the same tap under Singer's own options, for Meltano): the mirror as a
Singer tap built with the Meltano Singer SDK. SCHEMA, RECORD and STATE messages on stdout, one JSON object
a line; logs on stderr.

Every stream is read from the outbox (db/events.py) by `seq`, its replication key: a stream's bookmark is
the last seq it gave, and a run reads `seq > bookmark` only. `seq` is commit-ordered on both backends, so
no event below a bookmark can appear later: nothing is skipped, and a rerun with the saved state and no
change gives no RECORD. Each sync reads up to the outbox's head as it was when the tap started, so
what commits meanwhile is the next run's.

- `templates`: a template once per sync in which it changed (the newest of its events after the
  bookmark): its row as `export --format jsonl` gives it (credentials redacted), with `seq`. A removed
  template comes as its tombstone: the last row, `removed_at` set.
- `versions`: one per new version of a template or item (`*.created`, `*.updated`): source, key,
  template_id, version, content_hash, url, fetched_at.
- `items`: a catalogue item once per sync in which it changed, as `items` holds it (`record` an object);
  a removed one is its tombstone (`removed_at` set).
- `runs`: a run once per sync in which it started, progressed or finished, as `scraper runs` lists it.
- `changes`: every `template.*` and `item.*` event: created, updated, removed, restored.

Only the package that builds it, singer-sdk (an optional extra), is imported here; only the tap's
command imports this module.
"""

import functools
import json
import time

from singer_sdk import Stream, Tap
from singer_sdk.singerlib import StateMessage

from scraper import __version__
from scraper.base.errors import ConfigError
from scraper.db import events, runrecord, runstate, schema, store
from scraper.db import items as item_table
from scraper.products import export

PAGE = 500                 # events read, and templates fetched, at a time
SQL_TYPES = {"INTEGER": "integer", "REAL": "number"}


def _nullable(*types, **more):
    return {"type": [*types, "null"], **more}


def _props(**props):
    return {"type": "object", "properties": props}


STRING, INTEGER, TIME = _nullable("string"), _nullable("integer"), _nullable("string", format="date-time")
JSON_VALUE = _nullable("array", "object", "string", "number", "boolean")     # a JSON column, decoded


class _Outbox(Stream):
    """A stream of the outbox's events of `types` after the bookmark, each turned into a record by
    `record()` (None: left out); `compact`: only the newest event of each subject."""

    replication_key = "seq"
    is_sorted = True           # by seq: the SDK checks it and keeps the bookmark as it goes
    types: tuple[str, ...] = ()
    compact = False

    def get_records(self, context):
        after = self.get_starting_replication_key_value(context) or 0
        conn, until = self._tap.conn, self._tap.head
        if self.compact:
            seqs = events.newest_seqs(conn, after, self.types, until)
            pages = (events.by_seq(conn, seqs[i:i + PAGE]) for i in range(0, len(seqs), PAGE))
        else:
            pages = self._pages(conn, after, until)
        for page in pages:
            yield from (r for r in self.records([events.as_dict(e) for e in page]) if r is not None)

    def _pages(self, conn, after, until):
        while True:
            page = events.after(conn, after, PAGE, self.types, until=until)
            yield page
            if len(page) < PAGE:
                return
            after = page[-1]["seq"]

    def records(self, page):
        return (self.record(e) for e in page)

    def record(self, event):
        raise NotImplementedError


class Templates(_Outbox):
    name = "templates"
    primary_keys = ("id",)
    types = ("template.*",)
    compact = True

    def __init__(self, tap):
        props = {"seq": {"type": "integer"}}
        types = dict(schema.columns(tap.conn, "workflows"))
        for col in export.table_columns(tap.conn):
            if col in export.JSON_COLUMNS or col == export.TRANSCRIPTS:
                props[col] = JSON_VALUE
            elif col in export.FLAGS:
                props[col] = _nullable("boolean")
            else:
                props[col] = _nullable(SQL_TYPES.get(types.get(col, ""), "string"))
        props["id"] = {"type": "integer"}
        super().__init__(tap, schema={"type": "object", "properties": props})

    def records(self, page):
        ids = [int(e["subject"]) for e in page]
        rows = {r["id"]: r for r in export.records(self._tap.conn, ids)}
        for e in page:
            row = rows.get(int(e["subject"]))
            yield None if row is None else {**row, "seq": e["seq"]}


class Versions(_Outbox):
    name = "versions"
    primary_keys = ("source", "key", "version")
    types = ("template.created", "template.updated", "item.created", "item.updated")
    schema = _props(seq={"type": "integer"}, source={"type": "string"}, key={"type": "string"},
                    template_id=INTEGER, version={"type": "integer"}, content_hash=STRING, url=STRING,
                    fetched_at=TIME)

    def record(self, e):
        d = e["data"]
        return {"seq": e["seq"], "source": e["source"], "key": e["subject"], "template_id": d.get("id"),
                "version": d["version"], "content_hash": d.get("content_hash"), "url": d.get("url"),
                "fetched_at": e["occurred_at"]}


class Items(_Outbox):
    name = "items"
    primary_keys = ("source", "key")
    types = ("item.*",)
    compact = True
    schema = _props(seq={"type": "integer"}, source={"type": "string"}, key={"type": "string"}, url=STRING,
                    version=INTEGER, first_seen_at=TIME, last_seen_at=TIME, removed_at=TIME,
                    record=_nullable("object"))

    def record(self, e):
        row = item_table.row(self._tap.conn, e["source"], e["subject"])
        if row is None:
            return None
        return {"seq": e["seq"], **{c: row[c] for c in item_table.EXPORTED}, "record": json.loads(row["record"])}


class Runs(_Outbox):
    name = "runs"
    primary_keys = ("id",)
    types = ("run.*",)
    compact = True
    schema = _props(seq={"type": "integer"}, id={"type": "integer"}, source=STRING, status=STRING,
                    started_at=TIME, finished_at=TIME, total=INTEGER, finished=INTEGER, failed=INTEGER,
                    invalid=INTEGER, exit_code=INTEGER, host=STRING, pid=INTEGER)

    def records(self, page):
        seqs = {}
        for e in page:       # compacted per source: a run of two sources has two newest events
            seqs[int(e["subject"])] = e["seq"]
        for run_id, seq in sorted(seqs.items(), key=lambda kv: kv[1]):
            found = runrecord.listing(self._tap.conn, self._tap.now(), before=run_id + 1, limit=1)
            yield {**found[0], "seq": seq} if found and found[0]["id"] == run_id else None


class Changes(_Outbox):
    name = "changes"
    primary_keys = ("id",)
    types = ("template.*", "item.*")
    schema = _props(seq={"type": "integer"}, id={"type": "string"}, type={"type": "string"},
                    source={"type": "string"}, subject={"type": "string"}, template_id=INTEGER, version=INTEGER,
                    content_hash=STRING, url=STRING, run_id=INTEGER, occurred_at=TIME)

    def record(self, e):
        d = e["data"]
        return {"seq": e["seq"], "id": e["id"], "type": e["type"], "source": e["source"], "subject": e["subject"],
                "template_id": d.get("id"), "version": d.get("version"), "content_hash": d.get("content_hash"),
                "url": d.get("url"), "run_id": e["run_id"], "occurred_at": e["occurred_at"]}


class TapScraper(Tap):
    """The mirror kept by `scraper` (n8n's templates, catalogue items, runs) as Singer streams, incremental
    by the outbox's seq: templates, versions, items, runs, changes."""

    name = "tap-scraper"
    package_name = "scraper"
    config_jsonschema = _props(db={"type": "string", "description": "The mirror: a SQLite file, or a "
                                                                    "postgresql:// URL"})
    config_jsonschema["required"] = ["db"]

    def __init__(self, *args, conn=None, now=time.time, **kwargs):
        """`conn`: an open connection to read (else the config's `db` is opened); `now`: the clock a run's
        status is read against."""
        self._conn, self.now = conn, now
        super().__init__(*args, **kwargs)

    @functools.cached_property
    def conn(self):
        if self._conn is not None:
            return self._conn
        if not runstate.exists(self.config["db"]):
            raise ConfigError("there is no database at the config's `db`; run `scraper seed` first.")
        return store.open_db(self.config["db"])

    @functools.cached_property
    def head(self):
        """The outbox's head when the sync began: every stream reads up to it."""
        return events.head(self.conn)

    def sync(self):
        """Sync every stream, then say the state once more: the last line is always the state to keep (the SDK
        says it only when it changes, so a run with nothing new would end on a SCHEMA)."""
        self.sync_all()
        self.write_message(StateMessage(value=self.state))

    def discover_streams(self):
        return [Templates(self), Versions(self), Items(self), Runs(self), Changes(self)]

    @classmethod
    def get_plugin_version(cls):
        return __version__


def state_of(text, path):
    """The state to resume from: a JSON object (the `value` of a STATE message, or the message itself, as a
    target echoes it), or ConfigError naming `path`."""
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError:
        raise ConfigError(f"--state {path} is not JSON (give the last STATE line a target printed, or {{}}).") \
            from None
    if isinstance(value, dict) and value.get("type") == "STATE":
        value = value.get("value")
    if not isinstance(value, dict):
        raise ConfigError(f"--state {path} holds no state object (expected {{\"bookmarks\": ...}}).")
    return value
