-- 27 (issue 43): cheap refreshes. `validators`: the last answer of each URL that came with a validator (ETag,
-- Last-Modified), its kept header fields exactly as received (a weak W/ included), the Accept-Encoding it was
-- asked with (the validators depend on it), its content's digest and compressed body (what a 304 hands back:
-- robots.txt, sitemaps and listing pages are stored nowhere else) and when it was last validated.
-- `revalidation`: per source and endpoint kind, what the validators earned and the verdict (unknown, used,
-- ignored, unreliable). `lastmod_trust`: per catalogue source, sampled pages whose unmoved sitemap lastmod
-- proved true or lied; `lastmod_samples` the pages queued to check it, settled by the next walk. A kept sitemap
-- file's `lastmod` is the date its index gave it when it was fetched (an unmoved one is not fetched again).
-- `revisits`: one row per 304 or unchanged 200 of a job's item, for the WARC export's revisit records. The same text serves PostgreSQL (translated).

    CREATE TABLE IF NOT EXISTS validators (
        url TEXT PRIMARY KEY,
        source TEXT NOT NULL,
        endpoint TEXT NOT NULL,
        etag TEXT,
        last_modified TEXT,
        accept_encoding TEXT NOT NULL,
        headers TEXT NOT NULL,
        status INTEGER NOT NULL,
        final_url TEXT,
        content_type TEXT,
        digest TEXT NOT NULL,
        size INTEGER NOT NULL,
        body BLOB NOT NULL,
        fetched_at REAL NOT NULL,
        validated_at REAL NOT NULL,
        checks INTEGER NOT NULL DEFAULT 0,
        lastmod TEXT
    );
    CREATE TABLE IF NOT EXISTS revalidation (
        source TEXT NOT NULL,
        endpoint TEXT NOT NULL,
        requests INTEGER NOT NULL DEFAULT 0,
        conditional INTEGER NOT NULL DEFAULT 0,
        not_modified INTEGER NOT NULL DEFAULT 0,
        unchanged_200 INTEGER NOT NULL DEFAULT 0,
        bytes_saved INTEGER NOT NULL DEFAULT 0,
        sampled INTEGER NOT NULL DEFAULT 0,
        lied INTEGER NOT NULL DEFAULT 0,
        state TEXT NOT NULL DEFAULT 'unknown',
        PRIMARY KEY (source, endpoint)
    );
    CREATE TABLE IF NOT EXISTS lastmod_trust (
        source TEXT PRIMARY KEY,
        sampled INTEGER NOT NULL DEFAULT 0,
        lied INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE IF NOT EXISTS lastmod_samples (
        source TEXT NOT NULL,
        key TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        queued_at REAL NOT NULL,
        PRIMARY KEY (source, key)
    );
    CREATE TABLE IF NOT EXISTS revisits (
        url TEXT NOT NULL,
        at REAL NOT NULL,
        profile TEXT NOT NULL CHECK (profile IN ('server-not-modified', 'identical-payload-digest')),
        digest TEXT NOT NULL,
        refers_to_date REAL NOT NULL,
        etag TEXT,
        last_modified TEXT
    );
    CREATE INDEX IF NOT EXISTS revisits_url ON revisits (url, at);
