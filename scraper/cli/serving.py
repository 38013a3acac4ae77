"""Commands that serve the mirror, read-only and credential-free: `mcp` for AI agents, `serve` (Datasette)
for people. Their libraries (the MCP SDK, Datasette) are optional extras imported only here, when the
command runs."""

import contextlib
import logging
import os
import signal

import click

from scraper.base.errors import Stopped
from scraper.cli.common import SIGNAL_CODES, SIGNAL_NAMES, Failure, command_settings, existing_db, raising_on_signals

log = logging.getLogger("scraper")


@contextlib.contextmanager
def _until_stopped(what):
    """A server runs until a signal: Ctrl-C or SIGTERM ends it with one line and exit 130 or 143 (uvicorn
    stops gracefully, then raises the signal again, which lands here)."""
    try:
        with raising_on_signals():
            yield
    except (Stopped, KeyboardInterrupt) as e:
        signum = getattr(e, "signum", signal.SIGINT)
        log.info("%s stopped by %s.", what, SIGNAL_NAMES[signum])
        raise click.exceptions.Exit(SIGNAL_CODES[signum]) from None


@click.command("mcp")
@click.pass_context
def mcp_cmd(ctx):
    """Serve the mirror to AI agents as an MCP server on stdio (stdout carries JSON-RPC only; logs go to
    stderr), read-only, on SQLite or PostgreSQL. Needs the MCP SDK: pip install 'scraper[mcp]'.

    Tools: search_templates, get_template (summary, nodes or full: the importable workflow, credentials
    redacted, with its attribution), template_stats, recent_changes, search_items, get_item.

    A desktop agent starts it as a child process, which does not inherit your shell's environment: give
    the database with --db in the client's `args`.

    \b
    Example:
        scraper --db /srv/scraper/jobs.db mcp
    """
    s = command_settings(ctx)
    try:
        import mcp  # noqa: F401 - only whether the extra is installed, before the server is built

        from scraper.products import mcpserver
    except ImportError:
        raise Failure("`scraper mcp` needs the MCP SDK: pip install 'scraper[mcp]'.") from None
    with existing_db(s):
        pass                      # there, readable, its schema current: the tools open it read-only
    log.info("MCP server on stdio, read-only over %s", s.db_shown)
    for signum in SIGNAL_CODES:
        signal.signal(signum, _exit_now)
    mcpserver.run(s.db_path, s.site_url)


def _exit_now(signum, frame):
    """The MCP server ends at once on Ctrl-C or SIGTERM, with one line and exit 130 or 143: it writes nothing
    and holds only read-only connections, and its stdin reader (a thread blocked on a read) would otherwise
    keep it alive until the client wrote again."""
    log.info("the MCP server stopped by %s.", SIGNAL_NAMES[signum])
    logging.shutdown()
    os._exit(SIGNAL_CODES[signum])


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on (0.0.0.0: every interface; nothing served holds a credential).")
@click.option("--port", type=click.IntRange(1, 65535), default=8001, show_default=True, help="The port to listen on.")
@click.pass_context
def serve_cmd(ctx, host, port):
    """Browse the mirror in Datasette: the templates (credentials redacted) with full-text search and
    facets on categories, node types and paid, changes, catalogue items, and canned queries (recent
    changes, top node types, paid templates, failures), as pages and JSON. Read-only, beside a running
    `run`; arbitrary SQL is off and the raw answers are not served. SQLite only. Needs Datasette:
    pip install 'scraper[serve]'.

    /dashboard is a page of the live run (status --json's figures, rates per domain, breakers, proxies)
    and the history (runs, changes, the catalogue; filters by source and dates), refreshing itself;
    /changes.atom is an Atom feed of the newest changes (?source=NAME for one source's).

    \b
    Example:
        scraper serve
        scraper serve --port 8080
    """
    s = command_settings(ctx)
    if s.postgres:
        raise Failure("`scraper serve` serves a SQLite file and --db is a PostgreSQL database; use `scraper mcp`, "
                      "which reads PostgreSQL too.")
    try:
        import datasette  # noqa: F401 - only whether the extra is installed

        from scraper.products import browse
    except ImportError:
        raise Failure("`scraper serve` needs Datasette: pip install 'scraper[serve]'.") from None
    with existing_db(s) as conn:
        app = browse.app(s.db_path, s)
        undecided = browse.undecided(conn)
    if undecided:
        log.warning("%d template(s) stored before redaction was decided show no description, explainer or workflow; "
                    "`scraper reextract` decides them.", undecided)
    _check_free(host, port)
    log.info("serving %s read-only on http://%s:%d/%s/templates, the dashboard on /dashboard (Ctrl-C stops)",
             s.db_shown, host, port, browse.db_name(s.db_path))
    with _until_stopped("serve"):
        browse.serve(app, host, port)


def _check_free(host, port):
    """One sentence when the address cannot be listened on (uvicorn would log and exit 1)."""
    import socket  # here: the commands' start-up (`status`) does not pay for it
    try:
        with socket.create_server((host, port)):
            pass
    except OSError as e:
        why = os.strerror(e.errno) if e.errno else str(e)
        raise Failure(f"cannot listen on {host}:{port} ({why}); choose another --port or --host.") from None
