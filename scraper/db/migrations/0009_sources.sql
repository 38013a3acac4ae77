-- 9: sources (issue 16): each job's source; each source's walks (for its cadence) and recorded site

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
