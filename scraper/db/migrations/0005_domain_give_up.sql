-- 5: a domain's failed probes in a row, and whether this run gave it up (--max-open-cycles)

    ALTER TABLE domains ADD COLUMN open_cycles INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE domains ADD COLUMN gave_up INTEGER NOT NULL DEFAULT 0;
