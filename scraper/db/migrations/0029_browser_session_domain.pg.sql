-- 29 (issue 42): the domain of a remote browser session's page (see 0029_browser_session_domain.sql); on
-- PostgreSQL only if missing, as every migration from 21 on may run again over a database set back to an older
-- version (an upgrade's test)

    ALTER TABLE browser_sessions ADD COLUMN IF NOT EXISTS domain TEXT;
