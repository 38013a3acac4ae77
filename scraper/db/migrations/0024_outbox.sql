-- 24 (issue 41): the outbox and the run record. `events`: one row per change the mirror recorded, job that
-- ended failed or invalid, run started, progressing or finished, written in the transaction of what it
-- describes (db/events.py: why `seq` is commit-ordered on both backends; AUTOINCREMENT so that a seq is never
-- issued twice). The changes recorded before it become its first events, with ids of their own
-- (`change:<seq>`). `runs.sources`: the sources a run worked (JSON list); `run_sources`: each one's counts
-- as the run ended (`scraper runs`); `webhook_endpoints` and `deliveries`: where each webhook endpoint is in
-- the outbox and every attempt (`scraper deliver`). PostgreSQL's spelling: 0024_outbox.pg.sql.

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
