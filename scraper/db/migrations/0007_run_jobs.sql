-- 7: each run's own record (issue 22): the jobs it finished and its id on the request log rows, so
-- that later runs cannot change what `report` says of it. Runs before this schema get the best record
-- left of them: the jobs finished in their window as they are now, and the requests sent in it.

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
