-- PostgreSQL's own search, the form here of what SQLite does with FTS5:
-- - templates (`search`): `workflows_tsv`, one weighted `tsvector` per template, GIN-indexed and kept in
--   step by triggers on `workflows`, `transcripts` and `template_videos` in the writer's own transaction,
--   as SQLite's triggers keep `workflows_fts`. Weights: name A; description, author B; node types,
--   categories C; explainer and the transcripts of the template's videos D. The column of 0006 goes.
-- - catalogue items (`search --source`): `items.search_tsv`, generated from the record: name A,
--   description B, every string of the record D (as `items_fts`: name, description, text).

ALTER TABLE workflows DROP COLUMN IF EXISTS search_tsv;

CREATE TABLE workflows_tsv (id BIGINT PRIMARY KEY, tsv tsvector NOT NULL);

CREATE INDEX workflows_tsv_gin ON workflows_tsv USING gin (tsv);

CREATE FUNCTION scraper_search_refresh(ids BIGINT[]) RETURNS void LANGUAGE sql AS $$
        INSERT INTO workflows_tsv (id, tsv)
            SELECT w.id, 
    setweight(to_tsvector('english', coalesce(w.name, '')), 'A')
    || setweight(to_tsvector('english', coalesce(w.description, '') || ' ' || coalesce(w.author, '')), 'B')
    || setweight(to_tsvector('english', translate(coalesce(w.node_types, '') || ' ' || coalesce(w.categories, ''),
                                                  '."[],-', '      ')), 'C')
    || setweight(to_tsvector('english', coalesce(w.explainer, '') || ' ' || coalesce((SELECT string_agg(t.text, ' ' ORDER BY t.video_id) FROM template_videos tv
                   JOIN transcripts t ON t.video_id = tv.video_id WHERE tv.template_id = w.id), '')), 'D')
 FROM workflows w WHERE w.id = ANY(ids) ORDER BY w.id
        ON CONFLICT (id) DO UPDATE SET tsv = EXCLUDED.tsv
    $$;

CREATE FUNCTION scraper_search_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
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
    END $$;

CREATE TRIGGER workflows_search_row AFTER INSERT OR DELETE
           OR UPDATE OF name, description, explainer, node_types, categories, author
           ON workflows FOR EACH ROW EXECUTE FUNCTION scraper_search_trigger();

CREATE TRIGGER workflows_search_transcript AFTER INSERT OR DELETE OR UPDATE OF video_id, text
           ON transcripts FOR EACH ROW EXECUTE FUNCTION scraper_search_trigger();

CREATE TRIGGER workflows_search_link AFTER INSERT OR DELETE OR UPDATE
           ON template_videos FOR EACH ROW EXECUTE FUNCTION scraper_search_trigger();

SELECT scraper_search_refresh(ARRAY(SELECT id FROM workflows));

CREATE FUNCTION scraper_item_text(record TEXT, part TEXT DEFAULT 'all') RETURNS TEXT
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
    END $$;

ALTER TABLE items ADD COLUMN search_tsv tsvector GENERATED ALWAYS AS (
           setweight(to_tsvector('english', scraper_item_text(record, 'name')), 'A')
           || setweight(to_tsvector('english', scraper_item_text(record, 'description')), 'B')
           || setweight(to_tsvector('english', scraper_item_text(record)), 'D')) STORED;

CREATE INDEX items_search ON items USING gin (search_tsv);
