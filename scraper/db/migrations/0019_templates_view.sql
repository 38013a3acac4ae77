-- 19: `templates`, the templates as `scraper serve` shows them (issue 30): every column a reader needs,
-- and the description, explainer and workflow redacted through the verdict stored with each row
-- (migration 16): as stored when clean under rules version 1, else its saved redacted form; NULL when
-- not decided under version 1 (a row stored before migration 16 until `reextract`). A new rules
-- version needs a new migration replacing this view (tests/test_serve.py checks that they agree).

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
