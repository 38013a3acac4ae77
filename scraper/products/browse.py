"""`scraper serve`: the mirror in Datasette, for people: table pages with facets, full-text search, canned
queries and a JSON API, read-only and credential-free.

- Datasette (an optional extra: only this module imports it, and only `scraper serve` imports this module)
  opens the SQLite file with `mode=ro`: it never takes the write lock, and WAL lets it read while a `run`
  writes. Each statement is cut off after SQL_TIME_LIMIT_MS.
- What holds credentials is not served. Only the tables and views of PUBLIC can be seen: `allowed`, a
  permission rule registered with Datasette, denies every other one (the raw `answers`, `workflows` as
  stored, the search index's copy of the text, `runs` with their settings, and any table a later schema
  adds), arbitrary SQL and the file's download, whatever the metadata says. The templates are the
  `templates` view (db/migrations, 18): their description, explainer and workflow as exports redact them.
- `?_search=` works on `templates`: the metadata links it to `workflows_fts` (its own copy of the text, so
  Datasette cannot find it alone). That index holds the descriptions as stored, so the search stays in
  Datasette's escaped mode (each word whole, in quotes): `guard` drops `_searchmode=raw`, whose prefix
  queries (`ghp_R7*`) could spell out a secret a character at a time, and `_fts_table`/`_fts_pk`.
"""

from pathlib import Path
from types import ModuleType

from scraper.db import canned, store

HOST, PORT = "127.0.0.1", 8001
DROPPED = (b"_searchmode", b"_fts_table", b"_fts_pk")       # query parameters `guard` removes
PLUGIN = "scraper-guard"
SQL_TIME_LIMIT_MS = 1_000        # Datasette's default, stated: a long query beside a run is cut off here
DASHBOARD_TIME_LIMIT_S = 5.0     # the dashboard's figures, all their statements together, beside a run
PAGE_SIZE = 50                   # rows a table page shows (a workflow cell can be 2 MB of JSON)
PUBLIC = ("templates", "changes", "items", "transcripts", "template_videos", "source_walks")

TEMPLATE_COLUMNS = {
    "id": "The template's id on n8n.io",
    "name": "Its title",
    "author": "The author's name or username",
    "url": "Its page on n8n.io",
    "categories": "n8n's categories (a JSON list)",
    "node_types": "The node types it uses (a JSON list, sorted)",
    "node_count": "How many nodes its workflow has",
    "total_views": "Views on n8n.io when last fetched",
    "created_at": "When it was published",
    "quality_score": "The mirror's 0-100 score of how complete its page is",
    "description": "Its description, credentials redacted",
    "explainer": "The explainer text of its page, credentials redacted",
    "workflow": "The importable workflow JSON, credentials redacted ([REDACTED]); empty while not yet decided",
    "version": "1 at its first fetch, one more at each change of content",
    "first_seen_at": "When the mirror first stored it",
    "last_seen_at": "When the mirror last saw it listed or fetched",
    "removed_at": "When n8n.io stopped serving it (empty while live)",
    "fetched_at": "When its answer was fetched",
    "paid": "1 when the template is sold, 0 when free, empty when not known",
    "price": "Its price, when sold",
    "purchase_url": "Where it is sold",
    "hollow": "1 when its stored workflow is the graph's shape only (what a paid template's answer holds)",
}


def queries():
    """The canned queries."""
    return canned.queries()


def metadata(db_name):
    """Datasette's metadata: titles, descriptions, the search wiring, facets, canned queries."""
    facets = [{"array": "categories"}, {"array": "node_types"}, "paid"]
    tables = {
        "templates": {
            "title": "Templates",
            "description": "The n8n.io workflow templates of this mirror, credentials redacted. Search with the "
                           "box (name, description, explainer, node types, categories, author, transcripts).",
            "fts_table": "workflows_fts", "fts_pk": "id", "sort_desc": "total_views", "facets": facets,
            "label_column": "name", "columns": dict(TEMPLATE_COLUMNS),
        },
        "changes": {"title": "Changes", "description": "Each addition, change, removal and restoration, with "
                                                       "its time and the version it made.",
                    "sort_desc": "seq", "facets": ["change", "source"],
                    "columns": {"template_id": "The template's id (templates only)", "source": "n8n, or the "
                                "catalogue source", "key": "The template's id or the item's path",
                                "change": "added, changed, removed or restored", "at": "When (UTC)",
                                "version": "The version it made (removed: the last one)"}},
        "items": {"title": "Catalogue items", "description": "The items of the catalogue sources (record: "
                                                            "the fields extracted from its page, JSON).",
                  "fts_table": "items_fts", "fts_pk": "rowid", "facets": ["source"],
                  "columns": {"source": "The catalogue source", "key": "The item's path on its site",
                              "record": "The fields extracted from its page (JSON)",
                              "version": "1 at its first fetch, one more at each change of its record",
                              "removed_at": "When its site stopped serving it (empty while live)"}},
        "transcripts": {"title": "Video transcripts", "description": "Transcripts of the templates' YouTube "
                                                                     "videos."},
        "template_videos": {"title": "Template videos", "description": "Which template shows which video."},
        "source_walks": {"title": "Walks", "description": "Each walk of each source's listing."},
    }
    return {
        "title": "n8n template mirror",
        "description": "A read-only view of a `scraper` mirror: templates with credentials redacted, changes, "
                       "catalogue items. Arbitrary SQL is off; the raw answers are not served.",
        "databases": {db_name: {"tables": tables, "queries": queries()}},
    }


SETTINGS = {
    "sql_time_limit_ms": SQL_TIME_LIMIT_MS,
    "default_allow_sql": False,      # SQL would reach the tables `allowed` denies
    "allow_download": False,         # the file holds the raw answers
    "default_page_size": PAGE_SIZE,
    "max_returned_rows": 1_000,
    "facet_time_limit_ms": SQL_TIME_LIMIT_MS,   # a facet cut off is silently left out: as long as a query
}


def db_name(path):
    """The name Datasette gives the file's database (its URL's first part): the file name without suffix."""
    return Path(path).stem


def guard(app):
    """ASGI middleware: the request without the query parameters of DROPPED, however their names are
    spelt (Datasette decodes `%xx` and `+` in a name before reading it)."""
    from urllib.parse import unquote_to_bytes

    def dropped(pair):
        return unquote_to_bytes(pair.split(b"=", 1)[0].replace(b"+", b" ")) in DROPPED

    async def guarded(scope, receive, send):
        if scope["type"] == "http" and scope.get("query_string"):
            kept = [p for p in scope["query_string"].split(b"&") if not dropped(p)]
            scope = dict(scope, query_string=b"&".join(kept))
        await app(scope, receive, send)
    return guarded


def allowed(datasette, actor, action, resource):
    """Datasette's permission rule (consulted last, so it has the last word): False for a table or view
    outside PUBLIC (`resource` is the name as the file spells it), for SQL and for the download; None
    (Datasette decides) for the rest."""
    if action == "view-table" and resource[1] not in PUBLIC:
        return False
    if action in ("execute-sql", "view-database-download"):
        return False
    return None


async def changes_atom(datasette, request):
    """`/changes.atom` (`?source=NAME`: one source's): the Atom feed of changes (products/atom), read on a
    connection of its own that cannot write, cut off after SQL_TIME_LIMIT_MS; an unknown source is a 404."""
    import asyncio

    from datasette.utils.asgi import Response

    from scraper.base.errors import ConfigError
    from scraper.db import store
    from scraper.products import atom

    def build():
        conn = store.read_only(datasette.get_database().path, SQL_TIME_LIMIT_MS / 1000)
        try:    # the command's site (its settings: `app`), as `export --format atom` links it
            return atom.build(conn, datasette.scraper_settings.site_url, request.args.get("source"),
                              self_url=request.url)
        finally:
            conn.close()
    try:
        body = await asyncio.to_thread(build)
    except ConfigError as e:
        return Response.text(str(e), status=404)
    return Response(body, content_type=atom.CONTENT_TYPE)


def app(path, settings=None):
    """The Datasette instance over the SQLite file at `path`; `settings` (the command's: its sources, proxies
    and the run lock beside the file) are the dashboard's, by default those of the file alone."""
    from datasette import hookimpl
    from datasette.app import Datasette
    from datasette.plugins import pm
    if pm.get_plugin(PLUGIN) is None:     # the plugin manager is Datasette's own: every way in is guarded
        plugin = ModuleType(PLUGIN)
        plugin.asgi_wrapper = hookimpl(lambda datasette: guard)
        plugin.permission_allowed = hookimpl(trylast=True)(allowed)
        plugin.register_routes = hookimpl(lambda datasette: ROUTES)
        pm.register(plugin, name=PLUGIN)
    if settings is None:
        from scraper.base import settings as settings_mod
        settings = settings_mod.build(db_path=str(path))
    ds = Datasette([str(path)], metadata=metadata(db_name(path)), settings=SETTINGS)
    ds.scraper_settings = settings        # what the dashboard's views read of the command (Datasette keeps it)
    return ds


async def dashboard_page(datasette, request):
    """`/dashboard`: the page; it fetches its figures from `/dashboard.json`."""
    from datasette.utils.asgi import Response

    from scraper.products import dashboard
    return Response.html(dashboard.page(), headers={"Cache-Control": "no-store"})


async def dashboard_json(datasette, request):
    """`/dashboard.json?source=&since=&until=`: the dashboard's figures, read on a read-only connection of
    their own in a thread (`?since=` that is no date: 400 and one sentence)."""
    import asyncio

    from datasette.utils.asgi import Response

    from scraper.base.errors import ConfigError
    from scraper.products import dashboard
    s = datasette.scraper_settings
    args = {k: request.args.get(k, "") for k in ("source", "since", "until")}

    def read():
        conn = store.read_only(s.db_path, DASHBOARD_TIME_LIMIT_S)
        try:
            return dashboard.figures(conn, store.clock(conn), s, db_name(s.db_path), **args)
        finally:
            conn.close()
    try:
        found = await asyncio.to_thread(read)
    except ConfigError as e:
        return Response.json({"error": str(e)}, status=400)
    return Response.json(found, headers={"Cache-Control": "no-store"})


ROUTES = [(r"^/dashboard$", dashboard_page), (r"^/dashboard\.json$", dashboard_json),
          (r"^/changes\.atom$", changes_atom)]


def undecided(conn):
    """How many templates the `templates` view shows without their text: no redaction verdict yet."""
    return canned.undecided(conn)


def serve(datasette, host=HOST, port=PORT):
    """Serve until interrupted (uvicorn, as `datasette serve` runs it)."""
    import asyncio

    import uvicorn
    asyncio.run(datasette.invoke_startup())
    uvicorn.run(datasette.app(), host=host, port=port, log_level="warning", lifespan="on")
