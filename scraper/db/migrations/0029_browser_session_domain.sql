-- 29 (issue 42): the domain of the page a remote browser session renders now, or rendered last (`domain`),
-- written when a worker places a page on it (pool/browserslot): the picker of sessions (policy/sessions) counts
-- the sessions busy with one domain against what that domain's rate can feed. PostgreSQL's sibling adds it
-- only where missing.

    ALTER TABLE browser_sessions ADD COLUMN domain TEXT;
