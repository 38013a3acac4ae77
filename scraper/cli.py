"""The `scraper` command: thin click commands over the library."""

import json
import logging
import os
import sqlite3
import sys
import time

import click

from . import __version__, export, seed, settings, status, store, supervisor
from .errors import ConfigError, FetchError, ParseError, RunLocked
from .queue import Queue


class Failure(click.ClickException):
    """One sentence for the user, and the exit code the contract gives it."""

    def __init__(self, message, exit_code=supervisor.EXIT_USAGE):
        super().__init__(message)
        self.exit_code = exit_code


def _settings(ctx, **values):
    """Validated settings from the global options plus this command's."""
    try:
        return settings.build(**ctx.obj, **values)
    except ConfigError as e:
        raise Failure(str(e)) from None


def _open_existing(s):
    """The database for reading commands: it must exist already (status never creates one)."""
    if not os.path.exists(s.db_path):
        raise Failure(f"there is no database at {s.db_path}; run `scraper seed` first.")
    try:
        return store.open_db(s.db_path)
    except sqlite3.DatabaseError as e:
        raise Failure(f"{s.db_path} cannot be used as a database ({e}).") from None


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--db", "db_path", envvar=settings.ENV_DB, default=settings.DB_PATH, show_default=True,
              help=f"The SQLite database of jobs and results [env {settings.ENV_DB}].")
@click.option("--api-url", envvar=settings.ENV_API_URL, default=settings.API_URL, show_default=True,
              help=f"Base URL of the n8n template API [env {settings.ENV_API_URL}].")
@click.option("--site-url", envvar=settings.ENV_SITE_URL, default=settings.SITE_URL, show_default=True,
              help=f"Base URL of the n8n.io site [env {settings.ENV_SITE_URL}].")
@click.option("--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
              default="INFO", show_default=True, help="How much to log on stderr.")
@click.version_option(__version__, prog_name="scraper")
@click.pass_context
def main(ctx, db_path, api_url, site_url, log_level):
    """Collect the n8n.io workflow library into one SQLite file, politely and resumably.

    \b
    Example:
        scraper seed --from-search
        scraper run --workers 4
        scraper status
    """
    logging.basicConfig(level=log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(message)s")
    ctx.obj = {"db_path": db_path, "api_url": api_url, "site_url": site_url}


def _job_count(s):
    conn = _open_existing(s)
    try:
        return sum(Queue(conn).counts().values())
    finally:
        conn.close()


@main.command("seed")
@click.option("--from-search", is_flag=True, help="Page through the search API and add every template id.")
@click.option("--ids", "ids_file", type=click.Path(dir_okay=False),
              help="A file of template ids or n8n.io workflow URLs, one per line.")
@click.option("--limit", type=click.IntRange(min=1), help="With --from-search: stop after this many templates.")
@click.option("--if-empty", is_flag=True, help="Do nothing when the database already has jobs (for `make scrape`).")
@click.option("--rate", "rate_per_s", type=float, default=settings.RATE_PER_S, show_default=True,
              help="Search requests per second (the same shared budget as `run`).")
@click.option("--burst", type=int, default=settings.BURST, show_default=True,
              help="Requests the site allows at once above the rate.")
@click.option("--max-attempts", type=int, default=settings.MAX_ATTEMPTS, show_default=True,
              help="With --from-search: attempts per search page before nothing is seeded.")
@click.option("--backoff-base", "backoff_base_s", type=float, default=settings.BACKOFF_BASE_S, show_default=True,
              help="With --from-search: first retry delay of a failing page in seconds; it doubles.")
@click.pass_context
def seed_cmd(ctx, from_search, ids_file, limit, if_empty, rate_per_s, burst, max_attempts, backoff_base_s):
    """Add one pending job per template; known templates are left as they are.

    \b
    Example:
        scraper seed --from-search --limit 500
        scraper seed --ids my-templates.txt
    """
    if from_search == bool(ids_file):
        raise Failure("give exactly one of --from-search or --ids FILE.")
    if limit is not None and not from_search:
        raise Failure("--limit goes with --from-search.")
    s = _settings(ctx, rate_per_s=rate_per_s, burst=burst, max_attempts=max_attempts, backoff_base_s=backoff_base_s)
    if if_empty and os.path.exists(s.db_path) and _job_count(s) > 0:
        click.echo("the database already has jobs; nothing seeded.")
        return
    try:
        ids = seed.read_ids_file(ids_file, s.site_url) if ids_file else seed.discover(s, limit)
    except ConfigError as e:
        raise Failure(str(e)) from None
    except (FetchError, ParseError) as e:
        raise Failure(f"the search API did not answer usably ({e}); nothing was seeded.", 1) from None
    conn = store.open_db(s.db_path)
    try:
        new, known = Queue(conn).seed(seed.job_rows(s, ids))
    finally:
        conn.close()
    click.echo(f"seeded {new} new job(s); {known} already known.")


@main.command("run")
@click.option("--workers", type=int, default=settings.WORKERS, show_default=True, help="Worker processes.")
@click.option("--rate", "rate_per_s", type=float, default=settings.RATE_PER_S, show_default=True,
              help="Requests per second to the site, shared by every worker.")
@click.option("--burst", type=int, default=settings.BURST, show_default=True,
              help="Requests the site allows at once above the rate.")
@click.option("--max-attempts", type=int, default=settings.MAX_ATTEMPTS, show_default=True,
              help="Attempts per job before it is `failed`.")
@click.option("--memory-limit", "memory_limit_mb", type=int, default=settings.MEMORY_LIMIT_MB, show_default=True,
              help="Resident memory ceiling of the whole pool, in MB.")
@click.option("--timeout", "timeout_s", type=float, default=settings.TIMEOUT_S, show_default=True,
              help="Seconds one whole answer may take: connection, headers and body.")
@click.option("--max-answer-mb", type=int, default=settings.MAX_ANSWER_MB, show_default=True,
              help="Largest answer accepted, in MB once decompressed; a larger one ends its job `too_large`.")
@click.option("--with-page", is_flag=True, help="Also fetch each template's n8n.io page (title, og:* tags).")
@click.option("--max-jobs-per-worker", type=int, default=settings.MAX_JOBS_PER_WORKER, show_default=True,
              help="Recycle a worker after this many jobs.")
@click.option("--breaker-failures", type=int, default=settings.BREAKER_FAILURES, show_default=True,
              help="Consecutive failed requests that open a domain's circuit breaker.")
@click.option("--breaker-open", "breaker_open_s", type=float, default=settings.BREAKER_OPEN_S, show_default=True,
              help="Seconds an open breaker waits before one probe.")
@click.option("--max-open-cycles", type=int, default=settings.MAX_OPEN_CYCLES, show_default=True,
              help="Failed probes in a row after which the run stops trying a domain (its jobs stay pending).")
@click.option("--backoff-base", "backoff_base_s", type=float, default=settings.BACKOFF_BASE_S, show_default=True,
              help="First retry delay in seconds; it doubles with each attempt.")
@click.option("--no-limit", is_flag=True, help="Switch the rate limiter off (benchmarks against your own server only).")
@click.pass_context
def run_cmd(ctx, no_limit, **options):
    """Work through the pending jobs with N worker processes until none is runnable.

    Exit codes: 0 every job done or invalid; 1 some job in the database is failed; 2 usage or configuration
    error; 3 some jobs were left pending because their domain kept failing; 70 workers kept crashing at
    start; 75 another run holds this database; 130/143 stopped by Ctrl-C/SIGTERM.

    \b
    Example:
        scraper run --workers 4 --rate 2 --burst 5
    """
    s = _settings(ctx, limiter=not no_limit, **options)
    if not os.path.exists(s.db_path):
        raise Failure(f"there is no database at {s.db_path}; run `scraper seed` first.")
    try:
        code = supervisor.run(s)
    except RunLocked as e:
        raise Failure(str(e), supervisor.EXIT_LOCKED) from None
    ctx.exit(code)


@main.command("status")
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text.")
@click.pass_context
def status_cmd(ctx, as_json):
    """Counts per status, recent rate, ETA, errors by kind, 429s and each domain's breaker.

    \b
    Example:
        scraper status
        scraper status --json | jq .eta_s
    """
    s = _settings(ctx)
    conn = _open_existing(s)
    try:
        report = status.report(Queue(conn), time.time())
    finally:
        conn.close()
    click.echo(json.dumps(report, indent=2) if as_json else status.render(report))


@main.command("retry")
@click.option("--failed", "which", flag_value="failed", default=True, help="Rows that ended failed (the default).")
@click.option("--invalid", "which", flag_value="invalid", help="Rows that ended invalid (404/410).")
@click.option("--all", "which", flag_value="all", help="Both failed and invalid rows.")
@click.pass_context
def retry_cmd(ctx, which):
    """Move finished-but-unsuccessful rows back to pending, their attempts reset.

    \b
    Example (cron, before the run):
        scraper retry --failed && scraper run
    """
    s = _settings(ctx)
    statuses = ("failed", "invalid") if which == "all" else (which,)
    conn = _open_existing(s)
    try:
        n = Queue(conn).retry(statuses)
    finally:
        conn.close()
    click.echo(f"moved {n} {'/'.join(statuses)} job(s) back to pending.")


@main.command("export")
@click.option("--format", "fmt", type=click.Choice(export.FORMATS), required=True, help="Output format.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write to this file (default: stdout).")
@click.pass_context
def export_cmd(ctx, fmt, output):
    """Stream the workflows table as JSON Lines, JSON or CSV (formula-safe).

    \b
    Example:
        scraper export --format jsonl --output workflows.jsonl
        scraper export --format csv > workflows.csv
    """
    s = _settings(ctx)
    conn = _open_existing(s)
    try:
        if output:
            n = export.write_file(conn, fmt, output)
            click.echo(f"exported {n} workflow(s) to {output}.", err=True)
        else:
            export.write(conn, fmt, sys.stdout)
    except ConfigError as e:
        raise Failure(str(e)) from None
    finally:
        conn.close()
