-- 8: one mirror core for every kind (issue 16): `items` holds the catalogue sources' records; `answers`
-- and `changes` become keyed by (source, key). They are rebuilt because their primary key and CHECKs named
-- templates: every old column stays, with its name (template_id is kept, filled for n8n rows), the new
-- columns come last, and every row is copied.

    CREATE TABLE items (
        source TEXT NOT NULL,
        key TEXT NOT NULL,
        url TEXT NOT NULL,
        record TEXT NOT NULL,
        version INTEGER NOT NULL,
        first_seen_at TEXT NOT NULL,
        last_seen_at TEXT NOT NULL,
        removed_at TEXT,
        content_hash TEXT NOT NULL,
        fetched_at TEXT NOT NULL,
        lastmod TEXT,
        PRIMARY KEY (source, key)
    );
    CREATE INDEX items_fetched ON items (source, fetched_at);
    -- full-text search over items (`search --source`): name, description, and every text in the record
    CREATE VIRTUAL TABLE items_fts USING fts5(
        name, description, text,
        tokenize = 'porter unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER items_fts_insert AFTER INSERT ON items BEGIN
        INSERT INTO items_fts (rowid, name, description, text)
        VALUES (new.rowid, json_extract(new.record, '$.name'), json_extract(new.record, '$.description'),
                (SELECT group_concat(value, ' ') FROM json_tree(new.record) WHERE type = 'text'));
    END;
    CREATE TRIGGER items_fts_update AFTER UPDATE OF record ON items BEGIN
        UPDATE items_fts SET name = json_extract(new.record, '$.name'),
            description = json_extract(new.record, '$.description'),
            text = (SELECT group_concat(value, ' ') FROM json_tree(new.record) WHERE type = 'text')
        WHERE rowid = new.rowid;
    END;
    CREATE TRIGGER items_fts_delete AFTER DELETE ON items BEGIN
        DELETE FROM items_fts WHERE rowid = old.rowid;
    END;
    CREATE TABLE answers_new (
        template_id INTEGER,
        version INTEGER NOT NULL,
        kind TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        fetched_at TEXT NOT NULL,
        body_fetched_at TEXT NOT NULL,
        size INTEGER NOT NULL,
        body BLOB NOT NULL,
        source TEXT NOT NULL DEFAULT 'n8n',
        key TEXT NOT NULL,
        PRIMARY KEY (source, key, version, kind)
    );
    INSERT INTO answers_new (template_id, version, kind, content_hash, fetched_at, body_fetched_at, size, body,
                             source, key)
        SELECT template_id, version, kind, content_hash, fetched_at, body_fetched_at, size, body,
               'n8n', CAST(template_id AS TEXT) FROM answers;
    DROP TABLE answers;
    ALTER TABLE answers_new RENAME TO answers;
    CREATE INDEX answers_template ON answers (template_id) WHERE template_id IS NOT NULL;
    CREATE TABLE changes_new (
        seq INTEGER PRIMARY KEY,
        template_id INTEGER,
        change TEXT NOT NULL CHECK (change IN ('added', 'changed', 'removed', 'restored')),
        at TEXT NOT NULL,
        version INTEGER,
        source TEXT NOT NULL DEFAULT 'n8n',
        key TEXT NOT NULL
    );
    INSERT INTO changes_new (seq, template_id, change, at, version, source, key)
        SELECT seq, template_id, change, at, version, 'n8n', CAST(template_id AS TEXT) FROM changes;
    DROP TABLE changes;
    ALTER TABLE changes_new RENAME TO changes;
    CREATE INDEX changes_at ON changes (at);
