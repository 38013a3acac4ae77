-- 26 (issue 47): the pool's memory on the run's row, written with its heartbeat, so `status --json` and
-- `serve`'s dashboard show a live run's memory against its ceiling: `memory_mb`, the PSS of the
-- supervisor and its workers' trees as last sampled, and `memory_limit_mb`, the run's --memory-limit. PostgreSQL's
-- sibling adds them only where missing.

    ALTER TABLE runs ADD COLUMN memory_mb REAL;
    ALTER TABLE runs ADD COLUMN memory_limit_mb REAL;
