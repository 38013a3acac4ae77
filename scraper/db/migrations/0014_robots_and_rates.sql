-- 14: politeness beyond a fixed rate (issue 15): robots.txt per host, a domain's effective rate and why,
-- the adaptive slow-down's state, when a breaker opened (the give-up rule), why a run gave a domain up

    CREATE TABLE robots (
        host TEXT PRIMARY KEY,              -- scheme://host:port
        fetched_at REAL NOT NULL,
        status INTEGER,                     -- HTTP status; NULL: no answer
        body BLOB,
        crawl_delay REAL,
        request_rate TEXT,                  -- "requests/seconds" as robots.txt gave it
        sitemaps TEXT NOT NULL DEFAULT '[]' -- JSON list of the Sitemap: URLs
    );
    ALTER TABLE domains ADD COLUMN opened_at REAL NOT NULL DEFAULT 0;
    ALTER TABLE domains ADD COLUMN gave_up_reason TEXT;
    ALTER TABLE domains ADD COLUMN robots_rate_per_s REAL;
    ALTER TABLE domains ADD COLUMN robots_crawl_delay INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE domains ADD COLUMN adaptive_rate_per_s REAL;
    ALTER TABLE domains ADD COLUMN adaptive_mark INTEGER;
    ALTER TABLE domains ADD COLUMN configured_rate_per_s REAL;
    ALTER TABLE domains ADD COLUMN rate_per_s REAL;
    ALTER TABLE domains ADD COLUMN rate_burst INTEGER;
    ALTER TABLE domains ADD COLUMN rate_reason TEXT;
    CREATE INDEX requests_domain_at ON requests (domain, at);
