-- 28 (issue 42): `browser_sessions`, one row per remote browser session a worker opened (a connection to a
-- cdp: or playwright: endpoint, or a Browserbase session): its run, worker and pid, provider, endpoint as shown
-- (no token), the provider's session id (Browserbase's, not a secret; what a later start releases when its
-- worker died), when it opened and closed, the pages it rendered, the pages under way (`active`: its load) and
-- its own errors (a crash, a disconnect, a protocol error: never the site's 4xx/5xx). `status` reads a run's
-- rows by `run_id`; the next start finds the rows of dead workers by the partial index on those still open.
-- IF NOT EXISTS: PostgreSQL may run it again over a database set back to an older version (an upgrade's test).

    CREATE TABLE IF NOT EXISTS browser_sessions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id INTEGER,
        worker TEXT NOT NULL,
        host TEXT,
        pid INTEGER NOT NULL,
        provider TEXT NOT NULL,
        endpoint TEXT NOT NULL,
        provider_session TEXT,
        opened_at REAL NOT NULL,
        closed_at REAL,
        pages INTEGER NOT NULL DEFAULT 0,
        active INTEGER NOT NULL DEFAULT 0,
        errors_crash INTEGER NOT NULL DEFAULT 0,
        errors_disconnect INTEGER NOT NULL DEFAULT 0,
        errors_protocol INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX IF NOT EXISTS browser_sessions_run ON browser_sessions (run_id);
    CREATE INDEX IF NOT EXISTS browser_sessions_open ON browser_sessions (opened_at) WHERE closed_at IS NULL;
