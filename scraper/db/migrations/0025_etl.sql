-- 25 (issue 41): the ETL API's runs. `etl_runs` maps a run's work on one source to the ETL API's run it
-- reports to (several runs map to one when a run continues the unfinished one a killed run left), and how far
-- its done items went (`done_at`, run_jobs.at). The ETL's place in the outbox is a `webhook_endpoints` row
-- of its own (mirror/etl.py). The same text serves PostgreSQL.

    CREATE TABLE IF NOT EXISTS etl_runs (
        run_id BIGINT NOT NULL,
        source TEXT NOT NULL,
        etl_id TEXT NOT NULL,
        done_at DOUBLE PRECISION NOT NULL DEFAULT 0,
        PRIMARY KEY (run_id, source)
    );
    CREATE INDEX IF NOT EXISTS etl_runs_etl ON etl_runs (etl_id);
