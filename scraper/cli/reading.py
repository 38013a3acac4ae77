"""Commands that read the queue: status, failures, sources, runs."""

import json
import signal
import sys
import threading
import time

import click

from scraper.base import logs
from scraper.cli.common import CLEAR_SCREEN, WATCH_EVERY_S, Choice, command_settings, db_exists, existing_db
from scraper.db import runrecord


@click.command("status")
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")
@click.option("--watch", is_flag=True, help="Redraw every second until Ctrl-C (with --json: one object a line).")
@click.pass_context
def status_cmd(ctx, as_json, watch):
    """The run holding the database (or none), counts per status (and per site), orphaned rows, rate, ETA,
    errors by kind, 429s and each domain's breaker.

    \b
    Example:
        scraper status
        scraper status --json | jq .eta_s
        scraper status --watch
    """
    from scraper.products import status
    s = command_settings(ctx)
    if not watch:
        report = _status_report(s)
        click.echo(json.dumps(report, indent=2) if as_json else status.render(report))
        return
    terminal = logs.is_terminal(sys.stdout)
    # Ctrl-C is how a watch ends, not an error. The handler only sets a flag: a KeyboardInterrupt raised
    # while SQLite runs a statement lands in the connection's progress handler, where sqlite3 turns it into
    # "interrupted" and the watch went on
    stop = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda signum, frame: stop.set())
    try:
        while not stop.is_set():
            report = _status_report(s)
            if stop.is_set():
                break
            if as_json:
                click.echo(json.dumps(report))
            else:
                click.echo((CLEAR_SCREEN if terminal else "") + f"status at {logs.stamp()}\n" + status.render(report)
                           + ("" if terminal else "\n"))
            stop.wait(WATCH_EVERY_S)
    finally:
        signal.signal(signal.SIGINT, previous)


def _status_report(s):
    from scraper.db import store
    from scraper.products import status
    with existing_db(s) as conn:
        return status.of_database(conn, store.clock(conn), s)



@click.command("failures")
@click.option("--json", "as_json", is_flag=True, help="A JSON array of {key, status, error_kind, last_error, "
              "attempts, http_status} instead of text.")
@click.option("--limit", type=click.IntRange(min=1), help="Show only the newest N.")
@click.pass_context
def failures_cmd(ctx, as_json, limit):
    """The jobs that ended failed or invalid, and why, the newest first.

    \b
    Example:
        scraper failures --limit 20
        scraper failures --json | jq -r '.[] | select(.status == "failed") | .key'
    """
    from scraper.db.queue import Queue
    from scraper.products import failures
    s = command_settings(ctx)
    with existing_db(s) as conn:
        rows = failures.listing(conn, limit, with_time=not as_json)
        total = sum(n for st, n in Queue(conn).counts().items() if st in ("failed", "invalid"))
    click.echo(json.dumps(rows, indent=2) if as_json else failures.render(rows, total))


@click.command("sources")
@click.option("--json", "as_json", is_flag=True, help="A JSON list of {name, kind, enabled, priority, every, domains, "
              "last_walk_at, next_due_at, jobs, items, validators, lastmod (a catalogue's)}, one per source, instead "
              "of text.")
@click.pass_context
def sources_cmd(ctx, as_json):
    """The sources of the sources file (or the built-in n8n): kind, priority, cadence, each domain's rate,
    the last walk and when the next is due (ISO 8601 UTC), jobs by status and items live and removed.

    \b
    Example:
        scraper --sources sources.toml sources
        scraper sources --json | jq -r '.[] | [.name, .next_due_at] | @tsv'
    """
    from scraper.db import store
    from scraper.products import sources
    s = command_settings(ctx)
    if db_exists(s):
        with existing_db(s) as conn:
            rows = sources.report(conn, s, time.time())
    else:   # nothing walked yet: the file alone (a read never creates a database)
        conn = store.connect(":memory:")
        store.migrate(conn)
        rows = sources.report(conn, s, time.time())
        conn.close()
    click.echo(json.dumps(rows, indent=2) if as_json else sources.render(rows))


RUNS_LIMIT = 20


@click.command("runs")
@click.option("--source", "source_name", metavar="NAME", help="Only the runs that worked this source, with its counts.")
@click.option("--status", "status_", type=Choice(runrecord.STATUSES),
              help="Only runs of this status.")
@click.option("--latest", is_flag=True, help="Only the newest run (of --source): the one to resume.")
@click.option("--before", type=click.IntRange(min=1), metavar="ID",
              help="Only runs older than run ID (the next page: the last id of this one).")
@click.option("--limit", type=click.IntRange(min=1), default=RUNS_LIMIT, show_default=True, help="Runs a page.")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON array (one object, or null, with --latest) instead of text.")
@click.pass_context
def runs_cmd(ctx, source_name, status_, latest, before, limit, as_json):
    """List the runs, newest first: each with its id, source, status (running, succeeded, failed, gave_up,
    stopped, crashed, died), when it started and finished, and how many jobs in all (total), finished,
    failed and invalid. A run works several sources: --source shows that one's counts, else their sums.

    \b
    Example:
        scraper runs
        scraper runs --source n8n --status failed --json
        scraper runs --latest --source n8n --json
        scraper runs --before 120 --limit 50
    """
    from scraper.db import store
    s = command_settings(ctx)
    with existing_db(s) as conn:
        found = runrecord.listing(conn, store.clock(conn), source_name, status_, before, 1 if latest else limit)
    if as_json:
        click.echo(json.dumps((found[0] if found else None) if latest else found, indent=2))
        return
    if not found:
        click.echo("no run yet" + (f" of {source_name}" if source_name else "")
                   + (f" with status {status_}" if status_ else "") + ".")
        return
    for r in found:
        click.echo(f"{r['id']:>5}  {r['source'] or '-':<14}  {r['status']:<9}  {r['started_at']}  "
                   f"{r['finished_at'] or '-':<25}  {r['finished']}/{r['total']} finished, {r['failed']} failed, "
                   f"{r['invalid']} invalid")
