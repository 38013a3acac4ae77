-- 6: full-text search (scraper.search) and the request log (scraper.requestlog)

    -- Holds its own copy of the text (not external content): snippets need it, and the transcripts
    -- text has no column in workflows. Node types and categories are indexed as words, not JSON.
    CREATE VIRTUAL TABLE workflows_fts USING fts5(
        name, description, explainer, node_types, categories, author, transcripts,
        tokenize = 'porter unicode61 remove_diacritics 2'
    );
    -- Triggers keep the index in the writer's own transaction, whoever the writer is.
    CREATE TRIGGER workflows_fts_insert AFTER INSERT ON workflows BEGIN
        INSERT INTO workflows_fts (rowid, name, description, explainer, node_types, categories, author, transcripts)
        VALUES (new.id, new.name, new.description, new.explainer,
                CASE WHEN json_valid(new.node_types)
                     THEN (SELECT group_concat(value, ' ') FROM json_each(new.node_types)) ELSE new.node_types END,
                CASE WHEN json_valid(new.categories)
                     THEN (SELECT group_concat(value, ', ') FROM json_each(new.categories)) ELSE new.categories END,
                new.author,
                (SELECT group_concat(t.text, ' ') FROM template_videos AS tv JOIN transcripts AS t ON t.video_id = tv.video_id WHERE tv.template_id = new.id));
    END;
    CREATE TRIGGER workflows_fts_update
    AFTER UPDATE OF id, name, description, explainer, node_types, categories, author ON workflows BEGIN
        UPDATE workflows_fts SET
            rowid = new.id, name = new.name, description = new.description, explainer = new.explainer,
            node_types = CASE WHEN json_valid(new.node_types)
                THEN (SELECT group_concat(value, ' ') FROM json_each(new.node_types)) ELSE new.node_types END,
            categories = CASE WHEN json_valid(new.categories)
                THEN (SELECT group_concat(value, ', ') FROM json_each(new.categories)) ELSE new.categories END,
            author = new.author,
            transcripts = (SELECT group_concat(t.text, ' ') FROM template_videos AS tv JOIN transcripts AS t ON t.video_id = tv.video_id WHERE tv.template_id = new.id)
        WHERE rowid = old.id;
    END;
    CREATE TRIGGER workflows_fts_delete AFTER DELETE ON workflows BEGIN
        DELETE FROM workflows_fts WHERE rowid = old.id;
    END;
    -- a transcript or a template's link to a video changes the transcripts text of the templates concerned
    CREATE TRIGGER workflows_fts_transcript_insert AFTER INSERT ON transcripts BEGIN
        UPDATE workflows_fts SET transcripts = (SELECT group_concat(t.text, ' ') FROM template_videos AS tv JOIN transcripts AS t ON t.video_id = tv.video_id WHERE tv.template_id = workflows_fts.rowid)
        WHERE rowid IN (SELECT template_id FROM template_videos WHERE video_id = new.video_id);
    END;
    CREATE TRIGGER workflows_fts_transcript_update AFTER UPDATE OF video_id, text ON transcripts BEGIN
        UPDATE workflows_fts SET transcripts = (SELECT group_concat(t.text, ' ') FROM template_videos AS tv JOIN transcripts AS t ON t.video_id = tv.video_id WHERE tv.template_id = workflows_fts.rowid)
        WHERE rowid IN (SELECT template_id FROM template_videos WHERE video_id IN (old.video_id, new.video_id));
    END;
    CREATE TRIGGER workflows_fts_transcript_delete AFTER DELETE ON transcripts BEGIN
        UPDATE workflows_fts SET transcripts = (SELECT group_concat(t.text, ' ') FROM template_videos AS tv JOIN transcripts AS t ON t.video_id = tv.video_id WHERE tv.template_id = workflows_fts.rowid)
        WHERE rowid IN (SELECT template_id FROM template_videos WHERE video_id = old.video_id);
    END;
    CREATE TRIGGER workflows_fts_link_insert AFTER INSERT ON template_videos BEGIN
        UPDATE workflows_fts SET transcripts = (SELECT group_concat(t.text, ' ') FROM template_videos AS tv JOIN transcripts AS t ON t.video_id = tv.video_id WHERE tv.template_id = new.template_id) WHERE rowid = new.template_id;
    END;
    CREATE TRIGGER workflows_fts_link_delete AFTER DELETE ON template_videos BEGIN
        UPDATE workflows_fts SET transcripts = (SELECT group_concat(t.text, ' ') FROM template_videos AS tv JOIN transcripts AS t ON t.video_id = tv.video_id WHERE tv.template_id = old.template_id) WHERE rowid = old.template_id;
    END;
    INSERT INTO workflows_fts (rowid, name, description, explainer, node_types, categories, author, transcripts)
    SELECT id, name, description, explainer,
           CASE WHEN json_valid(node_types)
                THEN (SELECT group_concat(value, ' ') FROM json_each(node_types)) ELSE node_types END,
           CASE WHEN json_valid(categories)
                THEN (SELECT group_concat(value, ', ') FROM json_each(categories)) ELSE categories END,
           author,
           (SELECT group_concat(t.text, ' ') FROM template_videos AS tv JOIN transcripts AS t ON t.video_id = tv.video_id WHERE tv.template_id = workflows.id)
    FROM workflows;
    -- One row per HTTP request a worker sent through its own HTTP path (for `scraper report`): when the
    -- answer or failure came, 'ok' (2xx) or the failure kind, the HTTP status of a failure, how long it took.
    CREATE TABLE requests (
        at REAL NOT NULL,
        domain TEXT NOT NULL,
        kind TEXT NOT NULL,
        status INTEGER,
        ms INTEGER NOT NULL
    );
    CREATE INDEX requests_at ON requests (at);
