-- 15: PostgreSQL's search of catalogue items and of the templates' transcripts (0015_postgres_search.pg.sql);
-- on SQLite items_fts and workflows_fts already hold them: nothing to do

    -- (PostgreSQL only)
