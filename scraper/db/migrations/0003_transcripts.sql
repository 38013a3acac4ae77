-- 3: transcripts of the templates' YouTube videos; templates stored before it get their links

    CREATE TABLE transcripts (
        video_id TEXT PRIMARY KEY,
        language_code TEXT NOT NULL,
        is_generated INTEGER NOT NULL CHECK (is_generated IN (0, 1)),
        text TEXT NOT NULL,
        segments TEXT NOT NULL,
        fetched_at TEXT NOT NULL
    );
    CREATE TABLE template_videos (
        template_id INTEGER NOT NULL,
        video_id TEXT NOT NULL,
        PRIMARY KEY (template_id, video_id)
    );
    CREATE INDEX template_videos_video ON template_videos (video_id);
    CREATE INDEX jobs_site ON jobs (site, status);
    INSERT OR IGNORE INTO template_videos (template_id, video_id)
        SELECT w.id, v.value FROM workflows AS w, json_each(w.videos) AS v
        WHERE json_valid(w.videos) AND json_type(w.videos) = 'array' AND v.type = 'text';
