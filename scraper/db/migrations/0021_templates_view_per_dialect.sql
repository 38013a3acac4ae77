-- 21 (issue 27): `templates` in each dialect's own spelling. On SQLite it is migration 19's view again;
-- on PostgreSQL (0021_templates_view_per_dialect.pg.sql) it reads the verdict with jsonb instead of the
-- SQLite look-alike functions migrations up to 20 installed there, which it drops with the `sqlite_master`
-- view.
DROP VIEW IF EXISTS templates;

    CREATE VIEW templates AS
    SELECT w.id, w.name, w.author,
           coalesce((SELECT s.site_url FROM source AS s WHERE s.id = 1), 'https://n8n.io') || '/workflows/' || w.id
               AS url,
           w.categories, w.node_types, w.node_count, w.total_views, w.created_at, w.quality_score,
           CASE WHEN w.clean_at_rules = 1 THEN w.description
                WHEN json_valid(w.redacted) AND CAST(json_extract(w.redacted, '$.rules') AS INTEGER) = 1
                THEN coalesce(json_extract(w.redacted, '$.columns.description'), w.description) END AS description,
           CASE WHEN w.clean_at_rules = 1 THEN w.explainer
                WHEN json_valid(w.redacted) AND CAST(json_extract(w.redacted, '$.rules') AS INTEGER) = 1
                THEN coalesce(json_extract(w.redacted, '$.columns.explainer'), w.explainer) END AS explainer,
           CASE WHEN w.clean_at_rules = 1 THEN w.workflow
                WHEN json_valid(w.redacted) AND CAST(json_extract(w.redacted, '$.rules') AS INTEGER) = 1
                THEN coalesce(json_extract(w.redacted, '$.columns.workflow'), w.workflow) END AS workflow,
           w.version, w.first_seen_at, w.last_seen_at, w.removed_at, w.fetched_at,
           w.paid, w.price, w.purchase_url, w.hollow
    FROM workflows AS w;
