"""`scraper mcp`: the mirror as an MCP server over stdio, for AI agents (the tools of products/lookup).

Built on the official MCP SDK (`mcp`, an optional extra: only this module imports it, and only `scraper mcp`
imports this module). stdout carries the JSON-RPC stream alone; logs go to stderr. Each call opens its own
read-only connection (db/store.read_only) and gives up after QUERY_LIMIT_S, so a server beside a running
`run` never takes the write lock and never hangs on a question.
"""

import json
import logging

from scraper import __version__
from scraper.base.errors import ConfigError, DatabaseError, OperationalError
from scraper.db import store
from scraper.products import lookup

QUERY_LIMIT_S = 5.0      # one tool call's statements together; Datasette's own limit is 1 s a statement
NAME = "scraper"
INSTRUCTIONS = ("A read-only mirror of the n8n.io workflow templates (and of any catalogue sources it keeps). "
                "Find templates with search_templates, then fetch one with get_template (mode full gives the "
                "importable workflow, credentials redacted, with its attribution). Credit the author and link "
                "the template's URL when you reuse one.")

log = logging.getLogger(__name__)


def build(db_path, default_site_url, time_limit_s=QUERY_LIMIT_S):
    """The MCPServer with the six tools over the database at `db_path` (a SQLite path or a PostgreSQL URL)."""
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import CallToolResult, TextContent

    server = MCPServer(NAME, version=__version__, instructions=INSTRUCTIONS)

    def ask(question, *args, **kwargs):
        """Answer one tool call on a connection of its own; a mistake or a time-out is the tool's error."""
        try:
            conn = store.read_only(db_path, time_limit_s)
        except (ConfigError, DatabaseError) as e:
            raise ToolError(f"the mirror cannot be opened ({e}).") from None
        try:
            found = question(conn, *args, **kwargs)
        except ConfigError as e:
            raise ToolError(str(e)) from None
        except OperationalError as e:
            text = str(e).lower()
            if "interrupted" in text or "timeout" in text or "cancel" in text:
                raise ToolError(f"the question took over {time_limit_s:g} s and was stopped; narrow it (fewer "
                                f"results, more words).") from None
            raise
        finally:
            conn.close()
        # compact text (the SDK's own is indented: half the size for a model's context), and the same as
        # structured content for clients that read it
        text = json.dumps(found, ensure_ascii=False, separators=(",", ":"))
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=found)

    def site(conn):
        return lookup.site_url(conn, default_site_url)

    @server.tool()
    def search_templates(query: str = "", nodes: list[str] | None = None, category: str = "",
                         include_paid: bool = True, limit: int = lookup.LIMIT, offset: int = 0,
                         fields: list[str] | None = None) -> CallToolResult:
        """Find n8n workflow templates. `query`: words that must all match (name, description, node types,
        categories, author; "a phrase", prefix*, OR, NOT); without it, the most viewed first. `nodes`: node
        types every result must use, e.g. "n8n-nodes-base.slack" or "slack". `category`: e.g. "AI".
        `include_paid`: false leaves out paid templates. `limit`: at most 100. `fields`: the keys to give of
        id, name, url, author, nodes, views, created_at, paid (default all). Returns {total, templates}."""
        return ask(lambda c: lookup.search_templates(c, site(c), query, nodes or (), category, include_paid,
                                                     limit, offset, fields or ()))

    @server.tool()
    def get_template(id: int, mode: str = "summary") -> CallToolResult:
        """One template by its id. mode "summary": its summary, description, categories and counts; "nodes":
        also the name and type of each node; "full": also the importable workflow (credentials redacted) and
        its attribution (author and n8n.io URL), to credit when reused."""
        return ask(lambda c: lookup.get_template(c, site(c), id, mode))

    @server.tool()
    def template_stats() -> CallToolResult:
        """How many templates are live, removed and paid, and the node types and categories the most live
        templates use."""
        return ask(lookup.template_stats)

    @server.tool()
    def recent_changes(since: str = "", kinds: list[str] | None = None, limit: int = lookup.CHANGES_LIMIT,
                       after: int | None = None, compact: bool = False) -> CallToolResult:
        """Templates (and catalogue items) added, changed, removed or restored: the newest `limit` (at most
        500) from `since` on (ISO 8601, e.g. 2026-11-01), of `kinds` only (default all), oldest first.
        With `after` (a cursor, 0 for the start): the event feed instead, {changes, next}, at most `limit`
        events after it (`compact`: the newest of each template or item); pass `next` back as `after`."""
        return ask(lookup.recent_changes, since, tuple(kinds or ()), limit, after, compact)

    @server.tool()
    def search_items(source: str, query: str = "", limit: int = lookup.LIMIT, offset: int = 0) -> CallToolResult:
        """Find items of one catalogue source (a site this mirror keeps besides n8n) by words; without
        words, in key order. Returns {items: [{key, source, url, name, snippet}]}."""
        return ask(lookup.search_items, source, query, limit, offset)

    @server.tool()
    def get_item(source: str, key: str) -> CallToolResult:
        """One item of a catalogue source by its key (as search_items gives it) or its URL: its record."""
        return ask(lookup.get_item, source, key)

    return server


def run(db_path, default_site_url):
    """Serve on stdin and stdout until the client closes stdin."""
    build(db_path, default_site_url).run()
