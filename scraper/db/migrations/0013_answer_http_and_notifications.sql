-- 13: what came with each raw answer (for the WARC export): the URL it came from, its HTTP status and
-- Content-Type; NULL for answers stored before (the export rebuilds their URL from id and kind); and each
-- ping or notification a run sent to the operator's service, and whether it arrived

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
