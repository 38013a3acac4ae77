-- PostgreSQL's spelling: `templates` reads the verdict as jsonb. `redacted` is written by store.upsert
-- (json.dumps); text jsonb would refuse (a `\u0000` escape) or that is not an object counts as no
-- verdict, so the column stays NULL (withheld), never fails the view. Then what migrations up to 20
-- installed to make PostgreSQL answer SQLite's SQL goes (none is called any more), and search runs without
-- helper functions: the templates' refresh written into their trigger function, and the items' tsvector
-- kept by a trigger instead of a generated column over a function (which had to stay IMMUTABLE and
-- callable by anyone).

DROP VIEW IF EXISTS templates;

CREATE VIEW templates AS
    SELECT w.id, w.name, w.author,
           coalesce((SELECT s.site_url FROM source AS s WHERE s.id = 1), 'https://n8n.io') || '/workflows/' || w.id
               AS url,
           w.categories, w.node_types, w.node_count, w.total_views, w.created_at, w.quality_score,
           CASE WHEN w.clean_at_rules = 1 THEN w.description WHEN v.doc -> 'rules' = '1'::jsonb THEN coalesce(v.doc #>> '{columns,description}', w.description) END AS description,
           CASE WHEN w.clean_at_rules = 1 THEN w.explainer WHEN v.doc -> 'rules' = '1'::jsonb THEN coalesce(v.doc #>> '{columns,explainer}', w.explainer) END AS explainer,
           CASE WHEN w.clean_at_rules = 1 THEN w.workflow WHEN v.doc -> 'rules' = '1'::jsonb THEN coalesce(v.doc #>> '{columns,workflow}', w.workflow) END AS workflow,
           w.version, w.first_seen_at, w.last_seen_at, w.removed_at, w.fetched_at,
           w.paid, w.price, w.purchase_url, w.hollow
    FROM workflows AS w
    LEFT JOIN LATERAL (SELECT CASE WHEN w.redacted LIKE '{%}' AND w.redacted !~ '\\u(0000|[dD][89abAB])'
                                   THEN w.redacted::jsonb END AS doc) AS v ON TRUE;

DROP VIEW IF EXISTS sqlite_master;

DROP AGGREGATE IF EXISTS sum(boolean);

DROP FUNCTION IF EXISTS _sqlite_bool_sum(bigint, boolean);

DROP FUNCTION IF EXISTS json_each(text);

DROP FUNCTION IF EXISTS json_array_length(text);

DROP FUNCTION IF EXISTS json_extract(text, text);

DROP FUNCTION IF EXISTS json_type(text);

DROP FUNCTION IF EXISTS json_valid(text);

DROP FUNCTION IF EXISTS _sqlite_json_type(jsonb);

DROP FUNCTION IF EXISTS _sqlite_json_value(jsonb);

DROP FUNCTION IF EXISTS round(double precision, integer);

DROP FUNCTION IF EXISTS unixepoch(text);

DROP FUNCTION IF EXISTS julianday(text);

DROP FUNCTION IF EXISTS strftime(text, text);

DROP FUNCTION IF EXISTS datetime(text);

DROP FUNCTION IF EXISTS _sqlite_ts(text);

CREATE OR REPLACE FUNCTION scraper_search_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
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
        INSERT INTO workflows_tsv (id, tsv)
        SELECT w.id, 
    setweight(to_tsvector('english', coalesce(w.name, '')), 'A')
    || setweight(to_tsvector('english', coalesce(w.description, '') || ' ' || coalesce(w.author, '')), 'B')
    || setweight(to_tsvector('english', translate(coalesce(w.node_types, '') || ' ' || coalesce(w.categories, ''),
                                                  '."[],-', '      ')), 'C')
    || setweight(to_tsvector('english', coalesce(w.explainer, '') || ' ' || coalesce((SELECT string_agg(t.text, ' ' ORDER BY t.video_id) FROM template_videos tv
                   JOIN transcripts t ON t.video_id = tv.video_id WHERE tv.template_id = w.id), '')), 'D')
 FROM workflows w WHERE w.id = ANY(ids) ORDER BY w.id
    ON CONFLICT (id) DO UPDATE SET tsv = EXCLUDED.tsv;
        RETURN NULL;
    END $$;

DROP FUNCTION IF EXISTS scraper_search_refresh(BIGINT[]);

ALTER TABLE items ALTER COLUMN search_tsv DROP EXPRESSION IF EXISTS;

CREATE OR REPLACE FUNCTION scraper_items_search() RETURNS trigger LANGUAGE plpgsql AS $$
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
    END $$;

DROP TRIGGER IF EXISTS items_search_row ON items;

CREATE TRIGGER items_search_row BEFORE INSERT OR UPDATE OF record ON items
           FOR EACH ROW EXECUTE FUNCTION scraper_items_search();

DROP FUNCTION IF EXISTS scraper_item_text(TEXT, TEXT);
