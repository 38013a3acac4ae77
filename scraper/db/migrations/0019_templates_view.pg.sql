-- PostgreSQL's spelling of `templates`: the verdict's JSON read as jsonb (see 0021, which makes this view
-- again for the databases that made it with look-alikes of SQLite's JSON functions).

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
