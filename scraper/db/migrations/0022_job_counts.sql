-- 22 (issue 31): `status` counted a million jobs each time (one walk of jobs_counts, 190 ms of its 234 ms),
-- and seeding paid for that index and for the CHECK on `status`: `IN (...)` builds a lookup table each
-- time the insert runs, once per row of an executemany (4.5 s of 16 s for a million rows; an OR of
-- equalities costs nothing). The table is made again (SQLite cannot change a CHECK in place) with the
-- same columns, indexes less jobs_counts, and AUTOINCREMENT so that an id is never used twice (the mark
-- below relies on it). `job_counts` keeps the rows per (site, source, domain, status) of every job up to
-- `job_counts_mark.upto`; triggers keep them as those jobs change or go, and whoever inserts jobs moves
-- the mark (db/jobcounts.py), which costs a GROUP BY over its own new rows instead of a trigger per row.
-- Jobs above the mark (inserted by another tool) are counted when read. PostgreSQL keeps its GROUP BY
-- (0022_job_counts.pg.sql: nothing to do there).

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
