"""SQLite connections (WAL, busy timeout) and the schema, migrated by `PRAGMA user_version`."""

import sqlite3

from scraper.base.errors import ConfigError

BUSY_TIMEOUT_MS = 30_000    # writers queue behind each other; a claim or a result holds the lock for < 1 ms

# Each entry moves the schema from version i to i+1; never edit one that has shipped, add another.
MIGRATIONS = [
    """
    CREATE TABLE jobs (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL UNIQUE,
        site TEXT NOT NULL,
        url TEXT NOT NULL,
        domain TEXT NOT NULL,
        priority INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL DEFAULT 'pending'
            CHECK (status IN ('pending', 'running', 'done', 'failed', 'invalid')),
        attempts INTEGER NOT NULL DEFAULT 0,
        available_at REAL NOT NULL DEFAULT 0,
        lease_until REAL,
        worker TEXT,
        error_kind TEXT,
        last_error TEXT,
        http_status INTEGER,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        started_at REAL,
        finished_at REAL,
        duration_ms INTEGER
    );
    -- claims read only pending rows, in this order
    CREATE INDEX jobs_claim ON jobs (priority DESC, available_at, id) WHERE status = 'pending';
    CREATE INDEX jobs_status ON jobs (status);
    CREATE INDEX jobs_running ON jobs (worker) WHERE status = 'running';
    CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
    CREATE TABLE workflows (
        id INTEGER PRIMARY KEY,
        name TEXT,
        description TEXT,
        author TEXT,
        categories TEXT,
        node_count INTEGER,
        node_types TEXT,
        workflow TEXT,
        total_views INTEGER,
        created_at TEXT,
        images TEXT,
        videos TEXT,
        explainer TEXT,
        quality_score INTEGER,
        fetched_at TEXT,
        content_hash TEXT,
        page_title TEXT,
        page_description TEXT,
        page_og TEXT
    );
    CREATE TABLE domains (
        domain TEXT PRIMARY KEY,
        state TEXT NOT NULL DEFAULT 'closed' CHECK (state IN ('closed', 'open', 'half_open')),
        failures INTEGER NOT NULL DEFAULT 0,
        open_until REAL NOT NULL DEFAULT 0,
        probe_until REAL NOT NULL DEFAULT 0,
        paused_until REAL NOT NULL DEFAULT 0,
        pause_s REAL NOT NULL DEFAULT 0,
        updated_at REAL
    );
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        pid INTEGER NOT NULL,
        started_at REAL NOT NULL,
        finished_at REAL,
        workers INTEGER NOT NULL,
        settings TEXT,
        done INTEGER,
        failed INTEGER,
        invalid INTEGER,
        exit_code INTEGER
    );
    -- all-time event counters (errors by kind, 429s): a status read is one small SELECT
    CREATE TABLE counters (
        name TEXT PRIMARY KEY,
        value INTEGER NOT NULL DEFAULT 0
    );
    """,
    # 2: the API and site URLs the database was seeded from (one row), so a run cannot mix two sites
    """
    CREATE TABLE source (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        api_url TEXT NOT NULL,
        site_url TEXT NOT NULL,
        recorded_at REAL NOT NULL
    );
    """,
    # 3: transcripts of the templates' YouTube videos; templates stored before it get their links
    """
    CREATE TABLE transcripts (
        video_id TEXT PRIMARY KEY,
        language_code TEXT NOT NULL,
        is_generated INTEGER NOT NULL CHECK (is_generated IN (0, 1)),
        text TEXT NOT NULL,
        segments TEXT NOT NULL,
        fetched_at TEXT NOT NULL
    );
    CREATE TABLE template_videos (
        template_id INTEGER NOT NULL,
        video_id TEXT NOT NULL,
        PRIMARY KEY (template_id, video_id)
    );
    CREATE INDEX template_videos_video ON template_videos (video_id);
    CREATE INDEX jobs_site ON jobs (site, status);
    INSERT OR IGNORE INTO template_videos (template_id, video_id)
        SELECT w.id, v.value FROM workflows AS w, json_each(w.videos) AS v
        WHERE json_valid(w.videos) AND json_type(w.videos) = 'array' AND v.type = 'text';
    """,
    # 4: the mirror (issue 8): raw answers per version, the listing as last walked, removals, changes
    """
    ALTER TABLE workflows ADD COLUMN version INTEGER;
    ALTER TABLE workflows ADD COLUMN first_seen_at TEXT;
    ALTER TABLE workflows ADD COLUMN last_seen_at TEXT;
    ALTER TABLE workflows ADD COLUMN removed_at TEXT;
    UPDATE workflows SET version = 1, first_seen_at = fetched_at, last_seen_at = fetched_at;
    CREATE INDEX workflows_removed ON workflows (removed_at) WHERE removed_at IS NOT NULL;
    -- one row per (template, version, kind): the answer as served, zlib-compressed
    CREATE TABLE answers (
        template_id INTEGER NOT NULL,
        version INTEGER NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('api', 'page')),
        content_hash TEXT NOT NULL,
        fetched_at TEXT NOT NULL,
        body_fetched_at TEXT NOT NULL,
        size INTEGER NOT NULL,
        body BLOB NOT NULL,
        PRIMARY KEY (template_id, version, kind)
    );
    -- each listed template's entry as last seen (hash without view counters)
    CREATE TABLE listing (
        id INTEGER PRIMARY KEY,
        entry_hash TEXT NOT NULL,
        seen_at TEXT NOT NULL
    );
    CREATE TABLE changes (
        seq INTEGER PRIMARY KEY,
        template_id INTEGER NOT NULL,
        change TEXT NOT NULL CHECK (change IN ('added', 'changed', 'removed', 'restored')),
        at TEXT NOT NULL,
        version INTEGER
    );
    CREATE INDEX changes_at ON changes (at);
    CREATE TABLE walks (
        id INTEGER PRIMARY KEY,
        started_at TEXT NOT NULL,
        finished_at TEXT NOT NULL,
        complete INTEGER NOT NULL,
        pages INTEGER NOT NULL,
        listed INTEGER NOT NULL,
        new INTEGER NOT NULL,
        changed INTEGER NOT NULL,
        removed INTEGER NOT NULL,
        restored INTEGER NOT NULL
    );
    """,
    # 5: a domain's failed probes in a row, and whether this run gave it up (--max-open-cycles)
    """
    ALTER TABLE domains ADD COLUMN open_cycles INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE domains ADD COLUMN gave_up INTEGER NOT NULL DEFAULT 0;
    """,
    # 6: full-text search (scraper.search) and the request log (scraper.requestlog)
    """
    -- Holds its own copy of the text (not external content): snippets need it, and the transcripts
    -- text has no column in workflows. Node types and categories are indexed as words, not JSON.
    CREATE VIRTUAL TABLE workflows_fts USING fts5(
        name, description, explainer, node_types, categories, author, transcripts,
        tokenize = 'porter unicode61 remove_diacritics 2'
    );
    -- Triggers keep the index in the writer's own transaction, whoever the writer is.
    CREATE TRIGGER workflows_fts_insert AFTER INSERT ON workflows BEGIN
        INSERT INTO workflows_fts (rowid, name, description, explainer, node_types, categories, author, transcripts)
        VALUES (new.id, new.name, new.description, new.explainer,
                CASE WHEN json_valid(new.node_types)
                     THEN (SELECT group_concat(value, ' ') FROM json_each(new.node_types)) ELSE new.node_types END,
                CASE WHEN json_valid(new.categories)
                     THEN (SELECT group_concat(value, ', ') FROM json_each(new.categories)) ELSE new.categories END,
                new.author,
                (SELECT group_concat(t.text, ' ') FROM template_videos AS tv JOIN transcripts AS t ON t.video_id = tv.video_id WHERE tv.template_id = new.id));
    END;
    CREATE TRIGGER workflows_fts_update
    AFTER UPDATE OF id, name, description, explainer, node_types, categories, author ON workflows BEGIN
        UPDATE workflows_fts SET
            rowid = new.id, name = new.name, description = new.description, explainer = new.explainer,
            node_types = CASE WHEN json_valid(new.node_types)
                THEN (SELECT group_concat(value, ' ') FROM json_each(new.node_types)) ELSE new.node_types END,
            categories = CASE WHEN json_valid(new.categories)
                THEN (SELECT group_concat(value, ', ') FROM json_each(new.categories)) ELSE new.categories END,
            author = new.author,
            transcripts = (SELECT group_concat(t.text, ' ') FROM template_videos AS tv JOIN transcripts AS t ON t.video_id = tv.video_id WHERE tv.template_id = new.id)
        WHERE rowid = old.id;
    END;
    CREATE TRIGGER workflows_fts_delete AFTER DELETE ON workflows BEGIN
        DELETE FROM workflows_fts WHERE rowid = old.id;
    END;
    -- a transcript or a template's link to a video changes the transcripts text of the templates concerned
    CREATE TRIGGER workflows_fts_transcript_insert AFTER INSERT ON transcripts BEGIN
        UPDATE workflows_fts SET transcripts = (SELECT group_concat(t.text, ' ') FROM template_videos AS tv JOIN transcripts AS t ON t.video_id = tv.video_id WHERE tv.template_id = workflows_fts.rowid)
        WHERE rowid IN (SELECT template_id FROM template_videos WHERE video_id = new.video_id);
    END;
    CREATE TRIGGER workflows_fts_transcript_update AFTER UPDATE OF video_id, text ON transcripts BEGIN
        UPDATE workflows_fts SET transcripts = (SELECT group_concat(t.text, ' ') FROM template_videos AS tv JOIN transcripts AS t ON t.video_id = tv.video_id WHERE tv.template_id = workflows_fts.rowid)
        WHERE rowid IN (SELECT template_id FROM template_videos WHERE video_id IN (old.video_id, new.video_id));
    END;
    CREATE TRIGGER workflows_fts_transcript_delete AFTER DELETE ON transcripts BEGIN
        UPDATE workflows_fts SET transcripts = (SELECT group_concat(t.text, ' ') FROM template_videos AS tv JOIN transcripts AS t ON t.video_id = tv.video_id WHERE tv.template_id = workflows_fts.rowid)
        WHERE rowid IN (SELECT template_id FROM template_videos WHERE video_id = old.video_id);
    END;
    CREATE TRIGGER workflows_fts_link_insert AFTER INSERT ON template_videos BEGIN
        UPDATE workflows_fts SET transcripts = (SELECT group_concat(t.text, ' ') FROM template_videos AS tv JOIN transcripts AS t ON t.video_id = tv.video_id WHERE tv.template_id = new.template_id) WHERE rowid = new.template_id;
    END;
    CREATE TRIGGER workflows_fts_link_delete AFTER DELETE ON template_videos BEGIN
        UPDATE workflows_fts SET transcripts = (SELECT group_concat(t.text, ' ') FROM template_videos AS tv JOIN transcripts AS t ON t.video_id = tv.video_id WHERE tv.template_id = old.template_id) WHERE rowid = old.template_id;
    END;
    INSERT INTO workflows_fts (rowid, name, description, explainer, node_types, categories, author, transcripts)
    SELECT id, name, description, explainer,
           CASE WHEN json_valid(node_types)
                THEN (SELECT group_concat(value, ' ') FROM json_each(node_types)) ELSE node_types END,
           CASE WHEN json_valid(categories)
                THEN (SELECT group_concat(value, ', ') FROM json_each(categories)) ELSE categories END,
           author,
           (SELECT group_concat(t.text, ' ') FROM template_videos AS tv JOIN transcripts AS t ON t.video_id = tv.video_id WHERE tv.template_id = workflows.id)
    FROM workflows;
    -- One row per HTTP request a worker sent through its own HTTP path (for `scraper report`): when the
    -- answer or failure came, 'ok' (2xx) or the failure kind, the HTTP status of a failure, how long it took.
    CREATE TABLE requests (
        at REAL NOT NULL,
        domain TEXT NOT NULL,
        kind TEXT NOT NULL,
        status INTEGER,
        ms INTEGER NOT NULL
    );
    CREATE INDEX requests_at ON requests (at);
    """,  # noqa: E501 - a shipped migration is never edited, not even to wrap its lines
    # 7: politeness beyond a fixed rate (issue 15): robots.txt per host, a domain's effective rate and why,
    # the adaptive slow-down's state, when a breaker opened (the give-up rule), why a run gave a domain up
    """
    CREATE TABLE robots (
        host TEXT PRIMARY KEY,              -- scheme://host:port
        fetched_at REAL NOT NULL,
        status INTEGER,                     -- HTTP status; NULL: no answer
        body BLOB,
        crawl_delay REAL,
        request_rate TEXT,                  -- "requests/seconds" as robots.txt gave it
        sitemaps TEXT NOT NULL DEFAULT '[]' -- JSON list of the Sitemap: URLs
    );
    ALTER TABLE domains ADD COLUMN opened_at REAL NOT NULL DEFAULT 0;
    ALTER TABLE domains ADD COLUMN gave_up_reason TEXT;
    ALTER TABLE domains ADD COLUMN robots_rate_per_s REAL;
    ALTER TABLE domains ADD COLUMN robots_crawl_delay INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE domains ADD COLUMN adaptive_rate_per_s REAL;
    ALTER TABLE domains ADD COLUMN adaptive_mark INTEGER;
    ALTER TABLE domains ADD COLUMN configured_rate_per_s REAL;
    ALTER TABLE domains ADD COLUMN rate_per_s REAL;
    ALTER TABLE domains ADD COLUMN rate_burst INTEGER;
    ALTER TABLE domains ADD COLUMN rate_reason TEXT;
    CREATE INDEX requests_domain_at ON requests (domain, at);
    """,
]

SCHEMA_VERSION = len(MIGRATIONS)

JOB_STATUSES = ("pending", "running", "done", "failed", "invalid")


def connect(path):
    """A connection in autocommit mode (transactions are explicit), WAL, with a busy timeout."""
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    # NORMAL under WAL loses at most the last commits on power loss, never consistency
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def check_readable(path):
    """Read the schema through a read-only connection: a damaged file is refused (ConfigError) before
    anything runs."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError as e:
        raise ConfigError(f"{path} is not a usable SQLite database ({e}).") from e


def open_db(path):
    """Connect and bring the schema up to date."""
    conn = connect(path)
    migrate(conn)
    return conn


def migrate(conn):
    """Apply the migrations this file has not seen yet, all in one transaction (a failure leaves the
    schema as it was); returns the schema version."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version >= SCHEMA_VERSION:
        return version
    conn.execute("BEGIN IMMEDIATE")
    try:
        # another process may have migrated while we waited for the lock
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        for number in range(version, SCHEMA_VERSION):
            for statement in _statements(MIGRATIONS[number]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number + 1}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return SCHEMA_VERSION


def _statements(script):
    """Split a migration into statements (executescript would commit our transaction)."""
    parts, buf = [], []
    for line in script.splitlines():
        buf.append(line)
        if sqlite3.complete_statement("\n".join(buf)):
            parts.append("\n".join(buf).strip())
            buf = []
    return [p for p in parts if p]


class transaction:
    """`with transaction(conn):` = BEGIN IMMEDIATE ... COMMIT, ROLLBACK on any exception."""

    def __init__(self, conn):
        self.conn = conn

    def __enter__(self):
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type, exc, tb):
        self.conn.execute("ROLLBACK" if exc_type else "COMMIT")
        return False


# --- the runs table: one row per `scraper run`, written by its supervisor --------------------------

def last_run(conn):
    """The newest row of `runs` (pid, started_at, finished_at), or None before the first run."""
    return conn.execute("SELECT pid, started_at, finished_at FROM runs ORDER BY id DESC LIMIT 1").fetchone()


def start_run(conn, pid, started_at, workers, settings_json):
    """Record a run that starts; returns its id."""
    with transaction(conn) as c:
        return c.execute(
            "INSERT INTO runs (pid, started_at, workers, settings) VALUES (?, ?, ?, ?)",
            (pid, started_at, workers, settings_json),
        ).lastrowid


def finish_run(conn, run_id, finished_at, counts, exit_code):
    """Record how the run ended: its exit code and the rows done, failed and invalid (`counts`) by then."""
    with transaction(conn) as c:
        c.execute(
            "UPDATE runs SET finished_at = ?, done = ?, failed = ?, invalid = ?, exit_code = ? WHERE id = ?",
            (finished_at, counts["done"], counts["failed"], counts["invalid"], exit_code, run_id),
        )


def upsert(conn, table, row, pk):
    """Insert `row` or update the row with the same `pk` (no duplicates on a re-fetch)."""
    cols = list(row)
    updates = ", ".join(f"{c} = excluded.{c}" for c in cols if c != pk)
    conn.execute(
        f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) "
        f"ON CONFLICT ({pk}) DO UPDATE SET {updates}",
        [row[c] for c in cols],
    )
