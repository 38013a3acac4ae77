-- 2: the API and site URLs the database was seeded from (one row), so a run cannot mix two sites

    CREATE TABLE source (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        api_url TEXT NOT NULL,
        site_url TEXT NOT NULL,
        recorded_at REAL NOT NULL
    );
