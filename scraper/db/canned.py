"""The SQL that `scraper serve` offers people in Datasette (SQLite only: Datasette reads a SQLite file):
the canned queries over the public `templates` view and the tables beside it, and the count of templates
the view shows without a redaction verdict yet.
"""

from __future__ import annotations

from typing import Any

from scraper.db import dashboard
from scraper.db.backend import Conn
from scraper.db.dialect import same


def queries() -> dict[str, dict[str, Any]]:
    """The canned queries."""
    found = {
        "recent_changes": {
            "title": "Recent changes",
            "description": "Templates and items added, changed, removed or restored, newest first.",
            "sql": "SELECT c.at, c.change, c.source, c.key, t.name, t.url FROM changes AS c "
                   "LEFT JOIN templates AS t ON t.id = c.template_id ORDER BY c.at DESC, c.seq DESC LIMIT 200",
        },
        "top_node_types": {
            "title": "Top node types",
            "description": "The node types the most live templates use.",
            "sql": "SELECT j.value AS node_type, COUNT(DISTINCT t.id) AS templates FROM templates AS t, "
                   "json_each(t.node_types) AS j WHERE json_valid(t.node_types) AND t.removed_at IS NULL "
                   "GROUP BY j.value ORDER BY templates DESC, node_type LIMIT 100",
        },
        "failures": {
            "title": "Failures",
            "description": "Jobs that ended failed or invalid, and why, newest first.",
            "sql": "SELECT key, status, error_kind, http_status, last_error, attempts, "
                   "datetime(finished_at, 'unixepoch') AS finished FROM jobs WHERE status IN ('failed', 'invalid') "
                   "ORDER BY finished_at DESC, id DESC LIMIT 500",
        },
        "paid_templates": {
            "title": "Paid templates",
            "description": "Live templates sold on n8n.io, most viewed first.",
            "sql": "SELECT id, name, author, price, purchase_url, url, total_views FROM templates "
                   "WHERE paid = 1 AND removed_at IS NULL ORDER BY total_views DESC, id",
        },
    }
    # the dashboard's history charts, each linked to its own query (db/dashboard)
    found.update((name, dict(q)) for name, q in dashboard.QUERIES.items())
    return found


def undecided(conn: Conn) -> int:
    """How many templates the `templates` view shows without their text: no redaction verdict yet."""
    return int(conn.execute(same("SELECT COUNT(*) FROM templates WHERE workflow IS NULL AND id IN "
                                 "(SELECT id FROM workflows WHERE workflow IS NOT NULL)")).one()[0])
