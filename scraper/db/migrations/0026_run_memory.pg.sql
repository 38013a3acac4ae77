-- 26 (issue 47): the pool's memory on the run's row (see 0026_run_memory.sql); on PostgreSQL only if missing,
-- as every migration from 21 on may run again over a database set back to an older version (an upgrade's test)

    ALTER TABLE runs ADD COLUMN IF NOT EXISTS memory_mb DOUBLE PRECISION;
    ALTER TABLE runs ADD COLUMN IF NOT EXISTS memory_limit_mb DOUBLE PRECISION;
