"""PostgreSQL's own spelling of the migrations, beside SQLite's (db/migrations.py):
- `OWN_SPELLING[i]` stands for migration i where the two dialects differ in more than mechanics (JSON read
  with jsonb, not with SQLite's json_each); `pg.migrate` runs it as written instead of translating;
- `EXTRA_MIGRATIONS[i]` runs right after migration i: the PostgreSQL form of what SQLite does with FTS5,
  whose statements are skipped there.

Nothing here imitates SQLite: the database holds the project's tables, indexes, triggers and trigger
functions only (migrations up to 20 also installed look-alikes of SQLite's functions and a `sqlite_master`
view; migration 21 drops them).

- Templates (`search`): `workflows_tsv`, one weighted `tsvector` per template, GIN-indexed and kept in
  step by triggers on `workflows`, `transcripts` and `template_videos` in the writer's own transaction,
  as SQLite's triggers keep `workflows_fts`. Weights: name A; description, author B; node types,
  categories C; explainer and the transcripts of the template's videos D.
- Catalogue items (`search --source`): `items.search_tsv`, generated from the record: name A,
  description B, every string of the record D (as `items_fts`: name, description, text).
"""

from scraper.db import jsonsql

# the text of one template's transcripts, as workflows_fts.transcripts holds it
TRANSCRIPTS_TEXT = """(SELECT string_agg(t.text, ' ' ORDER BY t.video_id) FROM template_videos tv
                   JOIN transcripts t ON t.video_id = tv.video_id WHERE tv.template_id = w.id)"""

TEMPLATE_TSV = f"""
    setweight(to_tsvector('english', coalesce(w.name, '')), 'A')
    || setweight(to_tsvector('english', coalesce(w.description, '') || ' ' || coalesce(w.author, '')), 'B')
    || setweight(to_tsvector('english', translate(coalesce(w.node_types, '') || ' ' || coalesce(w.categories, ''),
                                                  '."[],-', '      ')), 'C')
    || setweight(to_tsvector('english', coalesce(w.explainer, '') || ' ' || coalesce({TRANSCRIPTS_TEXT}, '')), 'D')
"""

TEMPLATE_SEARCH = [
    "ALTER TABLE workflows DROP COLUMN IF EXISTS search_tsv",     # the first form, without transcripts
    "CREATE TABLE workflows_tsv (id BIGINT PRIMARY KEY, tsv tsvector NOT NULL)",
    "CREATE INDEX workflows_tsv_gin ON workflows_tsv USING gin (tsv)",
    # in id order, so two writers refreshing the same templates lock their rows in the same order
    f"""CREATE FUNCTION scraper_search_refresh(ids BIGINT[]) RETURNS void LANGUAGE sql AS $$
        INSERT INTO workflows_tsv (id, tsv)
            SELECT w.id, {TEMPLATE_TSV} FROM workflows w WHERE w.id = ANY(ids) ORDER BY w.id
        ON CONFLICT (id) DO UPDATE SET tsv = EXCLUDED.tsv
    $$""",
    """CREATE FUNCTION scraper_search_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_TABLE_NAME = 'workflows' THEN
            IF TG_OP = 'DELETE' THEN
                DELETE FROM workflows_tsv WHERE id = OLD.id;
            ELSE
                PERFORM scraper_search_refresh(ARRAY[NEW.id]);
            END IF;
        ELSIF TG_TABLE_NAME = 'template_videos' THEN
            IF TG_OP = 'DELETE' THEN
                PERFORM scraper_search_refresh(ARRAY[OLD.template_id]);
            ELSE
                PERFORM scraper_search_refresh(ARRAY[NEW.template_id]);
            END IF;
        ELSIF TG_OP = 'DELETE' THEN
            PERFORM scraper_search_refresh(ARRAY(SELECT template_id FROM template_videos
                                                 WHERE video_id = OLD.video_id));
        ELSIF TG_OP = 'UPDATE' THEN
            PERFORM scraper_search_refresh(ARRAY(SELECT template_id FROM template_videos
                                                 WHERE video_id IN (OLD.video_id, NEW.video_id)));
        ELSE
            PERFORM scraper_search_refresh(ARRAY(SELECT template_id FROM template_videos
                                                 WHERE video_id = NEW.video_id));
        END IF;
        RETURN NULL;
    END $$""",
    """CREATE TRIGGER workflows_search_row AFTER INSERT OR DELETE
           OR UPDATE OF name, description, explainer, node_types, categories, author
           ON workflows FOR EACH ROW EXECUTE FUNCTION scraper_search_trigger()""",
    """CREATE TRIGGER workflows_search_transcript AFTER INSERT OR DELETE OR UPDATE OF video_id, text
           ON transcripts FOR EACH ROW EXECUTE FUNCTION scraper_search_trigger()""",
    """CREATE TRIGGER workflows_search_link AFTER INSERT OR DELETE OR UPDATE
           ON template_videos FOR EACH ROW EXECUTE FUNCTION scraper_search_trigger()""",
    "SELECT scraper_search_refresh(ARRAY(SELECT id FROM workflows))",
]

ITEM_SEARCH = [
    # every string of a record, name and description first (items_fts' `text`); a record that is not
    # JSON jsonb takes (a NUL, NaN) is indexed as it is rather than failing the writer's statement
    """CREATE FUNCTION scraper_item_text(record TEXT, part TEXT DEFAULT 'all') RETURNS TEXT
       LANGUAGE plpgsql IMMUTABLE AS $$
    DECLARE doc jsonb;
    BEGIN
        BEGIN
            doc := record::jsonb;
        EXCEPTION WHEN others THEN
            RETURN CASE WHEN part = 'all' THEN record ELSE '' END;
        END;
        IF part <> 'all' THEN
            RETURN CASE WHEN jsonb_typeof(doc) = 'object' THEN coalesce(doc ->> part, '') ELSE '' END;
        END IF;
        RETURN coalesce((SELECT string_agg(v #>> '{}', ' ') FROM jsonb_path_query(doc, 'strict $.**') v
                         WHERE jsonb_typeof(v) = 'string'), '');
    END $$""",
    """ALTER TABLE items ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS (
           setweight(to_tsvector('english', scraper_item_text(record, 'name')), 'A')
           || setweight(to_tsvector('english', scraper_item_text(record, 'description')), 'B')
           || setweight(to_tsvector('english', scraper_item_text(record)), 'D')) STORED""",
    "CREATE INDEX items_search ON items USING gin (search_tsv)",
]

EXTRA_MIGRATIONS = {
    5: [
        # search: one weighted tsvector per template (replaced by workflows_tsv at 14)
        """ALTER TABLE workflows ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS (
               setweight(to_tsvector('english', coalesce(name, '')), 'A')
               || setweight(to_tsvector('english', coalesce(description, '')), 'B')
               || setweight(to_tsvector('english', coalesce(author, '')), 'B')
               || setweight(to_tsvector('english', translate(coalesce(node_types, '') || ' '
                                                             || coalesce(categories, ''), '."[],-', '      ')), 'C')
               || setweight(to_tsvector('english', coalesce(explainer, '')), 'D')) STORED""",
        "CREATE INDEX workflows_search ON workflows USING gin (search_tsv)",
    ],
    # migration 15 (index 14) is empty on SQLite: its FTS5 tables already hold items and transcripts
    14: TEMPLATE_SEARCH + ITEM_SEARCH,
}

# `workflows_tsv` rows of the templates in `ids` made again (in id order, so two writers refreshing the same
# templates lock their rows in the same order); `{ids}` is an expression giving a BIGINT[]
REFRESH = f"""INSERT INTO workflows_tsv (id, tsv)
        SELECT w.id, {TEMPLATE_TSV} FROM workflows w WHERE w.id = ANY({{ids}}) ORDER BY w.id
    ON CONFLICT (id) DO UPDATE SET tsv = EXCLUDED.tsv"""
REFRESH_ALL = REFRESH.replace("w.id = ANY({ids})", "TRUE")

# migration 3 (index 2): the transcripts tables, and the links of the templates stored before them
TRANSCRIPTS = [
    """CREATE TABLE transcripts (
        video_id TEXT PRIMARY KEY,
        language_code TEXT NOT NULL,
        is_generated BIGINT NOT NULL CHECK (is_generated IN (0, 1)),
        text TEXT NOT NULL,
        segments TEXT NOT NULL,
        fetched_at TEXT NOT NULL
    )""",
    """CREATE TABLE template_videos (
        template_id BIGINT NOT NULL,
        video_id TEXT NOT NULL,
        PRIMARY KEY (template_id, video_id)
    )""",
    "CREATE INDEX template_videos_video ON template_videos (video_id)",
    "CREATE INDEX jobs_site ON jobs (site, status)",
    """INSERT INTO template_videos (template_id, video_id)
        SELECT w.id, v.value FROM workflows AS w, {} WHERE {}
        ON CONFLICT DO NOTHING""".format(*jsonsql.list_strings(True, "w.videos", "v")),
]

# migration 19's view (db/migrations.TEMPLATES_VIEW) in PostgreSQL's words: the verdict's JSON read as
# jsonb. `redacted` is written by store.upsert (json.dumps); text jsonb would refuse (a `\u0000` escape) or
# that is not an object counts as no verdict, so the column stays NULL (withheld), never fails the view.
def _redacted(column: str) -> str:
    return (f"CASE WHEN w.clean_at_rules = 1 THEN w.{column} WHEN v.doc -> 'rules' = '1'::jsonb "
            f"THEN coalesce(v.doc #>> '{{columns,{column}}}', w.{column}) END AS {column}")


TEMPLATES_VIEW = [
    "DROP VIEW IF EXISTS templates",
    f"""CREATE VIEW templates AS
    SELECT w.id, w.name, w.author,
           coalesce((SELECT s.site_url FROM source AS s WHERE s.id = 1), 'https://n8n.io') || '/workflows/' || w.id
               AS url,
           w.categories, w.node_types, w.node_count, w.total_views, w.created_at, w.quality_score,
           {_redacted("description")},
           {_redacted("explainer")},
           {_redacted("workflow")},
           w.version, w.first_seen_at, w.last_seen_at, w.removed_at, w.fetched_at,
           w.paid, w.price, w.purchase_url, w.hollow
    FROM workflows AS w
    LEFT JOIN LATERAL (SELECT CASE WHEN w.redacted LIKE '{{%}}' AND w.redacted !~ '{jsonsql.REFUSED_RE}'
                                   THEN w.redacted::jsonb END AS doc) AS v ON TRUE""",
]

# what migrations up to 20 installed to make PostgreSQL answer SQLite's SQL; none is called any more
SQLITE_LOOKALIKES = [
    "DROP VIEW IF EXISTS sqlite_master",
    "DROP AGGREGATE IF EXISTS sum(boolean)",
    "DROP FUNCTION IF EXISTS _sqlite_bool_sum(bigint, boolean)",
    "DROP FUNCTION IF EXISTS json_each(text)",
    "DROP FUNCTION IF EXISTS json_array_length(text)",
    "DROP FUNCTION IF EXISTS json_extract(text, text)",
    "DROP FUNCTION IF EXISTS json_type(text)",
    "DROP FUNCTION IF EXISTS json_valid(text)",
    "DROP FUNCTION IF EXISTS _sqlite_json_type(jsonb)",
    "DROP FUNCTION IF EXISTS _sqlite_json_value(jsonb)",
    "DROP FUNCTION IF EXISTS round(double precision, integer)",
    "DROP FUNCTION IF EXISTS unixepoch(text)",
    "DROP FUNCTION IF EXISTS julianday(text)",
    "DROP FUNCTION IF EXISTS strftime(text, text)",
    "DROP FUNCTION IF EXISTS datetime(text)",
    "DROP FUNCTION IF EXISTS _sqlite_ts(text)",
]

# Search without helper functions: the templates' refresh written into their trigger function, and the
# items' tsvector kept by a trigger instead of a generated column over a function (which had to stay
# IMMUTABLE and callable by anyone). Its text: every string of the record, name and description first.
SEARCH_BY_TRIGGERS = [
    f"""CREATE OR REPLACE FUNCTION scraper_search_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE ids BIGINT[];
    BEGIN
        IF TG_TABLE_NAME = 'workflows' THEN
            IF TG_OP = 'DELETE' THEN
                DELETE FROM workflows_tsv WHERE id = OLD.id;
                RETURN NULL;
            END IF;
            ids := ARRAY[NEW.id];
        ELSIF TG_TABLE_NAME = 'template_videos' THEN
            IF TG_OP = 'DELETE' THEN
                ids := ARRAY[OLD.template_id];
            ELSE
                ids := ARRAY[NEW.template_id];
            END IF;
        ELSIF TG_OP = 'DELETE' THEN
            ids := ARRAY(SELECT template_id FROM template_videos WHERE video_id = OLD.video_id);
        ELSIF TG_OP = 'UPDATE' THEN
            ids := ARRAY(SELECT template_id FROM template_videos WHERE video_id IN (OLD.video_id, NEW.video_id));
        ELSE
            ids := ARRAY(SELECT template_id FROM template_videos WHERE video_id = NEW.video_id);
        END IF;
        {REFRESH.format(ids="ids")};
        RETURN NULL;
    END $$""",
    "DROP FUNCTION IF EXISTS scraper_search_refresh(BIGINT[])",
    "ALTER TABLE items ALTER COLUMN search_tsv DROP EXPRESSION IF EXISTS",
    # a record that is not JSON jsonb takes (a NUL, NaN) is indexed as it is rather than failing the writer
    """CREATE OR REPLACE FUNCTION scraper_items_search() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        doc jsonb;
        name TEXT := '';
        description TEXT := '';
        everything TEXT := NEW.record;
    BEGIN
        BEGIN
            doc := NEW.record::jsonb;
            everything := coalesce((SELECT string_agg(v #>> '{}', ' ') FROM jsonb_path_query(doc, 'strict $.**') v
                                    WHERE jsonb_typeof(v) = 'string'), '');
            IF jsonb_typeof(doc) = 'object' THEN
                name := coalesce(doc ->> 'name', '');
                description := coalesce(doc ->> 'description', '');
            END IF;
        EXCEPTION WHEN others THEN
            NULL;
        END;
        NEW.search_tsv := setweight(to_tsvector('english', name), 'A')
            || setweight(to_tsvector('english', description), 'B')
            || setweight(to_tsvector('english', everything), 'D');
        RETURN NEW;
    END $$""",
    "DROP TRIGGER IF EXISTS items_search_row ON items",
    """CREATE TRIGGER items_search_row BEFORE INSERT OR UPDATE OF record ON items
           FOR EACH ROW EXECUTE FUNCTION scraper_items_search()""",
    "DROP FUNCTION IF EXISTS scraper_item_text(TEXT, TEXT)",
]

# migration 24 (index 23, issue 41): the outbox and the run record, as db/migrations.OUTBOX; the changes
# recorded before it become events with their JSON made by jsonb. Written to run again harmlessly, as 21 to
# 23 do (tests/test_postgres.py replays the migrations from 20 on a current schema).
OUTBOX = [
    """CREATE TABLE IF NOT EXISTS events (
        seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        type TEXT NOT NULL,
        source TEXT NOT NULL,
        subject TEXT NOT NULL,
        run_id BIGINT,
        occurred_at TEXT NOT NULL,
        data TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS events_run ON events (run_id, seq) WHERE run_id IS NOT NULL",
    """INSERT INTO events (id, type, source, subject, run_id, occurred_at, data)
        SELECT 'change:' || c.seq,
               CASE WHEN c.template_id IS NOT NULL THEN 'template.' ELSE 'item.' END
               || CASE c.change WHEN 'added' THEN 'created' WHEN 'changed' THEN 'updated' ELSE c.change END,
               c.source, c.key, NULL, c.at,
               CASE WHEN c.template_id IS NOT NULL
                    THEN jsonb_build_object('id', c.template_id, 'version', c.version,
                                            'content_hash', a.content_hash, 'url', a.url)
                    ELSE jsonb_build_object('key', c.key, 'version', c.version, 'content_hash', a.content_hash,
                                            'url', coalesce(a.url, i.url)) END::text
        FROM changes AS c
        LEFT JOIN answers AS a ON a.source = c.source AND a.key = c.key AND a.version = c.version
             AND a.kind = CASE WHEN c.template_id IS NOT NULL THEN 'api' ELSE 'page' END
        LEFT JOIN items AS i ON i.source = c.source AND i.key = c.key AND c.template_id IS NULL
        WHERE NOT EXISTS (SELECT 1 FROM events)
        ORDER BY c.seq""",
    "ALTER TABLE runs ADD COLUMN IF NOT EXISTS sources TEXT",
    """CREATE TABLE IF NOT EXISTS run_sources (
        run_id BIGINT NOT NULL,
        source TEXT NOT NULL,
        total BIGINT NOT NULL,
        finished BIGINT NOT NULL,
        failed BIGINT NOT NULL,
        invalid BIGINT NOT NULL,
        PRIMARY KEY (run_id, source)
    )""",
    """CREATE TABLE IF NOT EXISTS webhook_endpoints (
        url TEXT PRIMARY KEY,
        cursor BIGINT NOT NULL DEFAULT 0,
        pending_upto BIGINT,
        attempts BIGINT NOT NULL DEFAULT 0,
        next_at DOUBLE PRECISION NOT NULL DEFAULT 0,
        last_error TEXT,
        disabled BIGINT NOT NULL DEFAULT 0,
        lease_until DOUBLE PRECISION NOT NULL DEFAULT 0,
        updated_at DOUBLE PRECISION
    )""",
    """CREATE TABLE IF NOT EXISTS deliveries (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        url TEXT NOT NULL,
        webhook_id TEXT NOT NULL,
        first_seq BIGINT NOT NULL,
        last_seq BIGINT NOT NULL,
        events BIGINT NOT NULL,
        at DOUBLE PRECISION NOT NULL,
        status BIGINT,
        ok BIGINT NOT NULL,
        error TEXT,
        ms BIGINT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS deliveries_url ON deliveries (url, id)",
]

OWN_SPELLING = {
    2: TRANSCRIPTS,
    18: TEMPLATES_VIEW,
    20: TEMPLATES_VIEW + SQLITE_LOOKALIKES + SEARCH_BY_TRIGGERS,
    # migration 22 remakes SQLite's jobs table for its CHECK and keeps counts there; PostgreSQL's CHECK costs
    # nothing, and its counts stay a GROUP BY over jobs_counts (db/jobcounts.py)
    21: [],
    23: OUTBOX,
}
