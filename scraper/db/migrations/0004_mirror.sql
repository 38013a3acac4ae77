-- 4: the mirror (issue 8): raw answers per version, the listing as last walked, removals, changes

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
