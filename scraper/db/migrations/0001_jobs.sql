-- 1: the queue (`jobs`, claimed in `jobs_claim` order), the templates (`workflows`), each domain's breaker and
-- pause (`domains`), each run (`runs`), all-time event counters (`counters`: a status read is one small SELECT)

    CREATE TABLE jobs (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL UNIQUE,
        site TEXT NOT NULL,
        url TEXT NOT NULL,
        domain TEXT NOT NULL,
        priority INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL DEFAULT 'pending'
            CHECK (status IN ('pending', 'running', 'done', 'failed', 'invalid')),
        attempts INTEGER NOT NULL DEFAULT 0,
        available_at REAL NOT NULL DEFAULT 0,
        lease_until REAL,
        worker TEXT,
        error_kind TEXT,
        last_error TEXT,
        http_status INTEGER,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        started_at REAL,
        finished_at REAL,
        duration_ms INTEGER
    );
    -- claims read only pending rows, in this order
    CREATE INDEX jobs_claim ON jobs (priority DESC, available_at, id) WHERE status = 'pending';
    CREATE INDEX jobs_status ON jobs (status);
    CREATE INDEX jobs_running ON jobs (worker) WHERE status = 'running';
    CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
    CREATE TABLE workflows (
        id INTEGER PRIMARY KEY,
        name TEXT,
        description TEXT,
        author TEXT,
        categories TEXT,
        node_count INTEGER,
        node_types TEXT,
        workflow TEXT,
        total_views INTEGER,
        created_at TEXT,
        images TEXT,
        videos TEXT,
        explainer TEXT,
        quality_score INTEGER,
        fetched_at TEXT,
        content_hash TEXT,
        page_title TEXT,
        page_description TEXT,
        page_og TEXT
    );
    CREATE TABLE domains (
        domain TEXT PRIMARY KEY,
        state TEXT NOT NULL DEFAULT 'closed' CHECK (state IN ('closed', 'open', 'half_open')),
        failures INTEGER NOT NULL DEFAULT 0,
        open_until REAL NOT NULL DEFAULT 0,
        probe_until REAL NOT NULL DEFAULT 0,
        paused_until REAL NOT NULL DEFAULT 0,
        pause_s REAL NOT NULL DEFAULT 0,
        updated_at REAL
    );
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        pid INTEGER NOT NULL,
        started_at REAL NOT NULL,
        finished_at REAL,
        workers INTEGER NOT NULL,
        settings TEXT,
        done INTEGER,
        failed INTEGER,
        invalid INTEGER,
        exit_code INTEGER
    );
    -- all-time event counters (errors by kind, 429s): a status read is one small SELECT
    CREATE TABLE counters (
        name TEXT PRIMARY KEY,
        value INTEGER NOT NULL DEFAULT 0
    );
