-- 11: the wait for the rate slot of each request (issue 21)

    -- How long the worker waited for the domain's rate slot (and any 429 pause) before the request
    -- (`status` sums it per domain over the last minute); 0 for the rows written before.
    ALTER TABLE requests ADD COLUMN slot_wait_ms INTEGER NOT NULL DEFAULT 0;
