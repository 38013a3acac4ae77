-- PostgreSQL's spelling: the links of the templates stored before read with jsonb (SQLite's json_each
-- is not PostgreSQL's).

CREATE TABLE transcripts (
        video_id TEXT PRIMARY KEY,
        language_code TEXT NOT NULL,
        is_generated BIGINT NOT NULL CHECK (is_generated IN (0, 1)),
        text TEXT NOT NULL,
        segments TEXT NOT NULL,
        fetched_at TEXT NOT NULL
    );

CREATE TABLE template_videos (
        template_id BIGINT NOT NULL,
        video_id TEXT NOT NULL,
        PRIMARY KEY (template_id, video_id)
    );

CREATE INDEX template_videos_video ON template_videos (video_id);

CREATE INDEX jobs_site ON jobs (site, status);

INSERT INTO template_videos (template_id, video_id)
        SELECT w.id, v.value FROM workflows AS w, LATERAL (SELECT e #>> '{}' AS value FROM jsonb_array_elements((CASE WHEN w.videos ~ '^\s*\[\s*(("([^"\\[:cntrl:]]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"|-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?|true|false|null)\s*(,\s*("([^"\\[:cntrl:]]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"|-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?|true|false|null)\s*)*)?\]\s*$' AND w.videos !~ '\\u(0000|[dD][89abAB])' THEN w.videos::jsonb ELSE '[]'::jsonb END)) AS e WHERE jsonb_typeof(e) = 'string') AS v WHERE TRUE
        ON CONFLICT DO NOTHING;
