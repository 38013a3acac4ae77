-- 12: many runs on one database (PostgreSQL): who runs where, alive until its heartbeat stops; and each
-- domain's rate reservation on the database clock (GCRA: the instant its next request may leave)

    ALTER TABLE runs ADD COLUMN host TEXT;
    ALTER TABLE runs ADD COLUMN heartbeat_at REAL;
    ALTER TABLE domains ADD COLUMN slot_at REAL NOT NULL DEFAULT 0;
