-- PostgreSQL's spelling: the FTS5 table and its triggers are SQLite's; here search is one weighted
-- `tsvector` column per template, GIN-indexed (replaced by `workflows_tsv` at 15). The request log as on
-- SQLite, translated.

-- One row per HTTP request a worker sent through its own HTTP path (for `scraper report`): when the
    -- answer or failure came, 'ok' (2xx) or the failure kind, the HTTP status of a failure, how long it took.
    CREATE TABLE requests (
        at DOUBLE PRECISION NOT NULL,
        domain TEXT NOT NULL,
        kind TEXT NOT NULL,
        status BIGINT,
        ms BIGINT NOT NULL
    );

CREATE INDEX requests_at ON requests (at);

ALTER TABLE workflows ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS (
               setweight(to_tsvector('english', coalesce(name, '')), 'A')
               || setweight(to_tsvector('english', coalesce(description, '')), 'B')
               || setweight(to_tsvector('english', coalesce(author, '')), 'B')
               || setweight(to_tsvector('english', translate(coalesce(node_types, '') || ' '
                                                             || coalesce(categories, ''), '."[],-', '      ')), 'C')
               || setweight(to_tsvector('english', coalesce(explainer, '')), 'D')) STORED;

CREATE INDEX workflows_search ON workflows USING gin (search_tsv);
