-- 23 (issue 29): the proxy pool's shared health, so every worker and machine sees it. `proxies` is keyed by
-- the proxy as shown (scheme://host:port, credentials as ***): no secret is ever stored. A proxy is
-- `good` or `quarantined` until `quarantined_until` after `streak` failures in a row (policy/proxies);
-- `proxy_bans` holds a proxy banned for one domain (a 403 through it while another got answers).

    CREATE TABLE IF NOT EXISTS proxies (
        url TEXT PRIMARY KEY,
        state TEXT NOT NULL DEFAULT 'good' CHECK (state = 'good' OR state = 'quarantined'),
        streak INTEGER NOT NULL DEFAULT 0,
        quarantined_until REAL NOT NULL DEFAULT 0,
        down_since REAL,
        requests INTEGER NOT NULL DEFAULT 0,
        failures INTEGER NOT NULL DEFAULT 0,
        updated_at REAL NOT NULL DEFAULT 0
    );
    CREATE TABLE IF NOT EXISTS proxy_bans (
        url TEXT NOT NULL,
        domain TEXT NOT NULL,
        banned_until REAL NOT NULL,
        PRIMARY KEY (url, domain)
    );
