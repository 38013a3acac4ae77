-- 10: what `fetcher = "auto"` learnt per source and URL pattern (issue 17)

    -- `fetcher = "auto"`: what each source's URL pattern learnt (scraper.policy.fetchmode), and the pages
    -- it fetched by plain HTTP and by browser, its re-checks and how many changed the verdict.
    CREATE TABLE fetch_patterns (
        source TEXT NOT NULL,
        pattern TEXT NOT NULL,
        verdict TEXT NOT NULL,
        agreeing INTEGER NOT NULL DEFAULT 0,
        by_http INTEGER NOT NULL DEFAULT 0,
        by_browser INTEGER NOT NULL DEFAULT 0,
        rechecks INTEGER NOT NULL DEFAULT 0,
        changes INTEGER NOT NULL DEFAULT 0,
        updated_at REAL NOT NULL,
        PRIMARY KEY (source, pattern)
    );
