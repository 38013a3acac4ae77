"""The schema of the jobs database, as migrations: entry N brings a database from version N to N + 1
(`PRAGMA user_version` on SQLite, the `schema_version` table on PostgreSQL, where `db/pg.py` translates
them). A shipped migration is never edited: a change of schema is a new entry at the end.
"""

from scraper.db.schema_mirror import MIRROR_CORE

# migration 19's view, in SQLite's spelling; migration 21 makes it again, unchanged here (PostgreSQL's own
# spelling is in db/pgschema.py)
TEMPLATES_VIEW = """
    CREATE VIEW templates AS
    SELECT w.id, w.name, w.author,
           coalesce((SELECT s.site_url FROM source AS s WHERE s.id = 1), 'https://n8n.io') || '/workflows/' || w.id
               AS url,
           w.categories, w.node_types, w.node_count, w.total_views, w.created_at, w.quality_score,
           CASE WHEN w.clean_at_rules = 1 THEN w.description
                WHEN json_valid(w.redacted) AND CAST(json_extract(w.redacted, '$.rules') AS INTEGER) = 1
                THEN coalesce(json_extract(w.redacted, '$.columns.description'), w.description) END AS description,
           CASE WHEN w.clean_at_rules = 1 THEN w.explainer
                WHEN json_valid(w.redacted) AND CAST(json_extract(w.redacted, '$.rules') AS INTEGER) = 1
                THEN coalesce(json_extract(w.redacted, '$.columns.explainer'), w.explainer) END AS explainer,
           CASE WHEN w.clean_at_rules = 1 THEN w.workflow
                WHEN json_valid(w.redacted) AND CAST(json_extract(w.redacted, '$.rules') AS INTEGER) = 1
                THEN coalesce(json_extract(w.redacted, '$.columns.workflow'), w.workflow) END AS workflow,
           w.version, w.first_seen_at, w.last_seen_at, w.removed_at, w.fetched_at,
           w.paid, w.price, w.purchase_url, w.hollow
    FROM workflows AS w;
"""

# 24 (issue 41): the outbox and the run record. `events`: one row per change the mirror recorded, job that
# ended failed or invalid, run started, progressing or finished, written in the transaction of what it
# describes (db/events.py: why `seq` is commit-ordered on both backends; AUTOINCREMENT so that a seq is never
# issued twice). The changes recorded before it become its first events, with ids of their own
# (`change:<seq>`). `runs.sources`: the sources a run worked (JSON list); `run_sources`: each one's counts
# as the run ended (`scraper runs`); `webhook_endpoints` and `deliveries`: where each webhook endpoint is in
# the outbox and every attempt (`scraper deliver`). PostgreSQL's spelling: db/pgschema.OUTBOX.
OUTBOX = """
    CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        type TEXT NOT NULL,
        source TEXT NOT NULL,
        subject TEXT NOT NULL,
        run_id INTEGER,
        occurred_at TEXT NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX events_run ON events (run_id, seq) WHERE run_id IS NOT NULL;
    INSERT INTO events (id, type, source, subject, run_id, occurred_at, data)
        SELECT 'change:' || c.seq,
               CASE WHEN c.template_id IS NOT NULL THEN 'template.' ELSE 'item.' END
               || CASE c.change WHEN 'added' THEN 'created' WHEN 'changed' THEN 'updated' ELSE c.change END,
               c.source, c.key, NULL, c.at,
               CASE WHEN c.template_id IS NOT NULL
                    THEN json_object('id', c.template_id, 'version', c.version, 'content_hash', a.content_hash,
                                     'url', a.url)
                    ELSE json_object('key', c.key, 'version', c.version, 'content_hash', a.content_hash,
                                     'url', coalesce(a.url, i.url)) END
        FROM changes AS c
        LEFT JOIN answers AS a ON a.source = c.source AND a.key = c.key AND a.version = c.version
             AND a.kind = CASE WHEN c.template_id IS NOT NULL THEN 'api' ELSE 'page' END
        LEFT JOIN items AS i ON i.source = c.source AND i.key = c.key AND c.template_id IS NULL
        ORDER BY c.seq;
    ALTER TABLE runs ADD COLUMN sources TEXT;
    CREATE TABLE run_sources (
        run_id INTEGER NOT NULL,
        source TEXT NOT NULL,
        total INTEGER NOT NULL,
        finished INTEGER NOT NULL,
        failed INTEGER NOT NULL,
        invalid INTEGER NOT NULL,
        PRIMARY KEY (run_id, source)
    );
    -- each webhook endpoint's place in the outbox (by its URL without credentials): the last seq it took with
    -- a 2xx, the batch being retried (so a retry sends the same events), the failed attempts in a row, and
    -- until when one deliverer holds it (a run's relay and `scraper deliver`, or two machines' runs, take turns)
    CREATE TABLE webhook_endpoints (
        url TEXT PRIMARY KEY,
        cursor INTEGER NOT NULL DEFAULT 0,
        pending_upto INTEGER,
        attempts INTEGER NOT NULL DEFAULT 0,
        next_at REAL NOT NULL DEFAULT 0,
        last_error TEXT,
        disabled INTEGER NOT NULL DEFAULT 0,
        lease_until REAL NOT NULL DEFAULT 0,
        updated_at REAL
    );
    -- every attempt to deliver a batch
    CREATE TABLE deliveries (
        id INTEGER PRIMARY KEY,
        url TEXT NOT NULL,
        webhook_id TEXT NOT NULL,
        first_seq INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
        events INTEGER NOT NULL,
        at REAL NOT NULL,
        status INTEGER,
        ok INTEGER NOT NULL,
        error TEXT,
        ms INTEGER NOT NULL
    );
    CREATE INDEX deliveries_url ON deliveries (url, id);
"""


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
    # 7: each run's own record (issue 22): the jobs it finished and its id on the request log rows, so
    # that later runs cannot change what `report` says of it. Runs before this schema get the best record
    # left of them: the jobs finished in their window as they are now, and the requests sent in it.
    """
    CREATE TABLE run_jobs (
        run_id INTEGER NOT NULL,
        job_id INTEGER NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('done', 'failed', 'invalid')),
        at REAL NOT NULL
    );
    CREATE INDEX run_jobs_run ON run_jobs (run_id, at);
    ALTER TABLE requests ADD COLUMN run_id INTEGER;
    CREATE INDEX requests_run ON requests (run_id, at);
    UPDATE requests SET run_id = (SELECT id FROM runs WHERE runs.started_at <= requests.at
                                  ORDER BY runs.started_at DESC LIMIT 1);
    INSERT INTO run_jobs (run_id, job_id, status, at)
    SELECT (SELECT id FROM runs WHERE runs.started_at <= j.finished_at ORDER BY runs.started_at DESC LIMIT 1),
           j.id, j.status, j.finished_at
    FROM jobs AS j
    WHERE j.status IN ('done', 'failed', 'invalid') AND j.finished_at IS NOT NULL
      AND EXISTS (SELECT 1 FROM runs WHERE runs.started_at <= j.finished_at);
    """,
    # 8: one mirror core for every kind (issue 16): items; answers and changes keyed by (source, key)
    MIRROR_CORE,
    # 9: sources (issue 16): each job's source; each source's walks (for its cadence) and recorded site
    """
    ALTER TABLE jobs ADD COLUMN source TEXT NOT NULL DEFAULT 'n8n';
    -- claims across sources read one source's pending rows in claim order (Queue._claim_where)
    CREATE INDEX jobs_claim_source ON jobs (source, priority DESC, available_at, id) WHERE status = 'pending';
    CREATE TABLE source_walks (
        id INTEGER PRIMARY KEY,
        source TEXT NOT NULL,
        started_at TEXT NOT NULL,
        finished_at TEXT NOT NULL,
        complete INTEGER NOT NULL,
        new INTEGER NOT NULL DEFAULT 0,
        changed INTEGER NOT NULL DEFAULT 0,
        removed INTEGER NOT NULL DEFAULT 0,
        restored INTEGER NOT NULL DEFAULT 0,
        requests INTEGER NOT NULL DEFAULT 0,
        error TEXT
    );
    CREATE INDEX source_walks_source ON source_walks (source, complete, id);
    -- the listing walks made before sources existed are the n8n source's: its cadence goes on from them
    INSERT INTO source_walks (source, started_at, finished_at, complete, new, changed, removed, restored, requests)
        SELECT 'n8n', started_at, finished_at, complete, new, changed, removed, restored, pages FROM walks ORDER BY id;
    -- the home URL each catalogue source was walked from (n8n's URLs stay in `source`)
    CREATE TABLE source_sites (
        source TEXT PRIMARY KEY,
        site TEXT NOT NULL,
        recorded_at REAL NOT NULL
    );
    """,
    # 10: what `fetcher = "auto"` learnt per source and URL pattern (issue 17)
    """
    -- `fetcher = "auto"`: what each source's URL pattern learnt (scraper.policy.fetchmode), and the pages
    -- it fetched by plain HTTP and by browser, its re-checks and how many changed the verdict.
    CREATE TABLE fetch_patterns (
        source TEXT NOT NULL,
        pattern TEXT NOT NULL,
        verdict TEXT NOT NULL,
        agreeing INTEGER NOT NULL DEFAULT 0,
        by_http INTEGER NOT NULL DEFAULT 0,
        by_browser INTEGER NOT NULL DEFAULT 0,
        rechecks INTEGER NOT NULL DEFAULT 0,
        changes INTEGER NOT NULL DEFAULT 0,
        updated_at REAL NOT NULL,
        PRIMARY KEY (source, pattern)
    );
    """,
    # 11: the wait for the rate slot of each request (issue 21)
    """
    -- How long the worker waited for the domain's rate slot (and any 429 pause) before the request
    -- (`status` sums it per domain over the last minute); 0 for the rows written before.
    ALTER TABLE requests ADD COLUMN slot_wait_ms INTEGER NOT NULL DEFAULT 0;
    """,
    # 12: many runs on one database (PostgreSQL): who runs where, alive until its heartbeat stops; and each
    # domain's rate reservation on the database clock (GCRA: the instant its next request may leave)
    """
    ALTER TABLE runs ADD COLUMN host TEXT;
    ALTER TABLE runs ADD COLUMN heartbeat_at REAL;
    ALTER TABLE domains ADD COLUMN slot_at REAL NOT NULL DEFAULT 0;
    """,
    # 13: what came with each raw answer (for the WARC export): the URL it came from, its HTTP status and
    # Content-Type; NULL for answers stored before (the export rebuilds their URL from id and kind); and each
    # ping or notification a run sent to the operator's service, and whether it arrived
    """
    ALTER TABLE answers ADD COLUMN url TEXT;
    ALTER TABLE answers ADD COLUMN http_status INTEGER;
    ALTER TABLE answers ADD COLUMN content_type TEXT;
    CREATE TABLE notifications (
        id INTEGER PRIMARY KEY,
        at REAL NOT NULL,
        kind TEXT NOT NULL,
        ok INTEGER NOT NULL CHECK (ok IN (0, 1)),
        detail TEXT
    );
    """,
    # 14: politeness beyond a fixed rate (issue 15): robots.txt per host, a domain's effective rate and why,
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
    # 15: PostgreSQL's search of catalogue items and of the templates' transcripts (db/pgschema.py, run after
    # this entry there); on SQLite items_fts and workflows_fts already hold them: nothing to do
    """
    -- (PostgreSQL only)
    """,
    # 16: the redaction decided when a template is stored (issue 19): `clean_at_rules`, the rules version
    # (policy/redact.RULES_VERSION) under which redacting the row's workflow, description and explainer
    # changes nothing (NULL: not known, or it holds a secret); `redacted`, for a row with secrets, its
    # redacted columns and count under the version it names (JSON). Written with those columns by
    # store.upsert; the export uses them only at the current version. Rows stored before stay NULL
    # (redacted at export, as before) until re-stored or reextracted.
    """
    ALTER TABLE workflows ADD COLUMN clean_at_rules INTEGER;
    ALTER TABLE workflows ADD COLUMN redacted TEXT;
    """,
    # 17: paid templates (issue 28), from the listing: `price` (NULL when free or unknown), `purchase_url`,
    # `paid` (1 when price > 0 or a purchase URL; NULL until a walk lists the id, e.g. seeded by --ids);
    # and `hollow`, 1 when the stored detail answer is the graph's shape only (what paid templates answer)
    """
    ALTER TABLE workflows ADD COLUMN price REAL;
    ALTER TABLE workflows ADD COLUMN purchase_url TEXT;
    ALTER TABLE workflows ADD COLUMN paid INTEGER;
    ALTER TABLE workflows ADD COLUMN hollow INTEGER NOT NULL DEFAULT 0;
    """,
    # 18 (issue 31): `status` read the jobs three times (by status, by site and status, and by source and
    # status, the last a scan of the table and a sort: 3.3 s of its 4.2 s at a million jobs). One covering
    # index in that order answers the three with one walk of the index, and replaces two, so seeding keeps
    # one B-tree fewer up to date.
    """
    DROP INDEX jobs_status;
    DROP INDEX jobs_site;
    CREATE INDEX jobs_counts ON jobs (status, site, source);
    """,
    # 19: `templates`, the templates as `scraper serve` shows them (issue 30): every column a reader needs,
    # and the description, explainer and workflow redacted through the verdict stored with each row
    # (migration 16): as stored when clean under rules version 1, else its saved redacted form; NULL when
    # not decided under version 1 (a row stored before migration 16 until `reextract`). A new rules
    # version needs a new migration replacing this view (tests/test_serve.py checks that they agree).
    TEMPLATES_VIEW,
    # 20: each listed template's price and purchase URL as last walked (issue 28), so that a template
    # fetched after the walk that listed it gets them in the same transaction as its row
    """
    ALTER TABLE listing ADD COLUMN price REAL;
    ALTER TABLE listing ADD COLUMN purchase_url TEXT;
    """,
    # 21 (issue 27): `templates` in each dialect's own spelling. On SQLite it is migration 19's view again;
    # on PostgreSQL (db/pgschema.py) it reads the verdict with jsonb instead of the SQLite look-alike
    # functions migrations up to 20 installed there, which it drops with the `sqlite_master` view.
    "DROP VIEW IF EXISTS templates;\n" + TEMPLATES_VIEW,
    # 22 (issue 31): `status` counted a million jobs each time (one walk of jobs_counts, 190 ms of its 234 ms),
    # and seeding paid for that index and for the CHECK on `status`: `IN (...)` builds a lookup table each
    # time the insert runs, once per row of an executemany (4.5 s of 16 s for a million rows; an OR of
    # equalities costs nothing). The table is made again (SQLite cannot change a CHECK in place) with the
    # same columns, indexes less jobs_counts, and AUTOINCREMENT so that an id is never used twice (the mark
    # below relies on it). `job_counts` keeps the rows per (site, source, domain, status) of every job up to
    # `job_counts_mark.upto`; triggers keep them as those jobs change or go, and whoever inserts jobs moves
    # the mark (db/jobcounts.py), which costs a GROUP BY over its own new rows instead of a trigger per row.
    # Jobs above the mark (inserted by another tool) are counted when read. PostgreSQL keeps its GROUP BY
    # (db/pgschema.py: nothing to do there).
    """
    CREATE TABLE jobs_new (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        key TEXT NOT NULL UNIQUE,
        site TEXT NOT NULL,
        url TEXT NOT NULL,
        domain TEXT NOT NULL,
        priority INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL DEFAULT 'pending'
            CHECK (status = 'pending' OR status = 'running' OR status = 'done' OR status = 'failed'
                   OR status = 'invalid'),
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
        duration_ms INTEGER,
        source TEXT NOT NULL DEFAULT 'n8n'
    );
    INSERT INTO jobs_new (id, key, site, url, domain, priority, status, attempts, available_at, lease_until, worker,
                          error_kind, last_error, http_status, created_at, updated_at, started_at, finished_at,
                          duration_ms, source)
        SELECT id, key, site, url, domain, priority, status, attempts, available_at, lease_until, worker,
               error_kind, last_error, http_status, created_at, updated_at, started_at, finished_at,
               duration_ms, source FROM jobs;
    DROP TABLE jobs;
    ALTER TABLE jobs_new RENAME TO jobs;
    CREATE INDEX jobs_claim ON jobs (priority DESC, available_at, id) WHERE status = 'pending';
    CREATE INDEX jobs_claim_source ON jobs (source, priority DESC, available_at, id) WHERE status = 'pending';
    CREATE INDEX jobs_running ON jobs (worker) WHERE status = 'running';
    CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
    CREATE TABLE job_counts (
        site TEXT NOT NULL,
        source TEXT NOT NULL,
        domain TEXT NOT NULL,
        status TEXT NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (site, source, domain, status)
    ) WITHOUT ROWID;
    CREATE TABLE job_counts_mark (upto INTEGER NOT NULL);
    INSERT INTO job_counts (site, source, domain, status, n)
        SELECT site, source, domain, status, COUNT(*) FROM jobs GROUP BY site, source, domain, status;
    INSERT INTO job_counts_mark (upto) SELECT coalesce(max(id), 0) FROM jobs;
    CREATE TRIGGER job_counts_update AFTER UPDATE OF status, site, source, domain ON jobs
    WHEN old.id <= (SELECT upto FROM job_counts_mark)
         AND (old.status <> new.status OR old.site <> new.site OR old.source <> new.source
              OR old.domain <> new.domain)
    BEGIN
        UPDATE job_counts SET n = n - 1
        WHERE site = old.site AND source = old.source AND domain = old.domain AND status = old.status;
        INSERT INTO job_counts (site, source, domain, status, n)
        VALUES (new.site, new.source, new.domain, new.status, 1)
        ON CONFLICT (site, source, domain, status) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER job_counts_delete AFTER DELETE ON jobs WHEN old.id <= (SELECT upto FROM job_counts_mark)
    BEGIN
        UPDATE job_counts SET n = n - 1
        WHERE site = old.site AND source = old.source AND domain = old.domain AND status = old.status;
    END;
    """,
    # 23 (issue 29): the proxy pool's shared health, so every worker and machine sees it. `proxies` is keyed by
    # the proxy as shown (scheme://host:port, credentials as ***): no secret is ever stored. A proxy is
    # `good` or `quarantined` until `quarantined_until` after `streak` failures in a row (policy/proxies);
    # `proxy_bans` holds a proxy banned for one domain (a 403 through it while another got answers).
    """
    CREATE TABLE IF NOT EXISTS proxies (
        url TEXT PRIMARY KEY,
        state TEXT NOT NULL DEFAULT 'good' CHECK (state = 'good' OR state = 'quarantined'),
        streak INTEGER NOT NULL DEFAULT 0,
        quarantined_until REAL NOT NULL DEFAULT 0,
        down_since REAL,
        requests INTEGER NOT NULL DEFAULT 0,
        failures INTEGER NOT NULL DEFAULT 0,
        updated_at REAL NOT NULL DEFAULT 0
    );
    CREATE TABLE IF NOT EXISTS proxy_bans (
        url TEXT NOT NULL,
        domain TEXT NOT NULL,
        banned_until REAL NOT NULL,
        PRIMARY KEY (url, domain)
    );
    """,
    OUTBOX,
]
