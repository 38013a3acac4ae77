"""The `scraper` command: thin click commands over the library."""

import contextlib
import io
import json
import logging
import os
import sqlite3
import sys
import time

import click

# Only what every command needs is imported here: each command imports its own modules, so a quick
# command (`status`) does not pay for requests, psutil, pyrate-limiter, sqlite-utils or the sites.
from scraper import __version__
from scraper.base import exitcodes, logs, settings
from scraper.base.errors import ConfigError, FetchError, ParseError, RunLocked
from scraper.products import export, search

log = logging.getLogger("scraper")

WATCH_EVERY_S = 1.0
CLEAR_SCREEN = "\x1b[H\x1b[2J"


class Failure(click.ClickException):
    """One sentence for the user, and its exit code (`exitcodes`; 2 unless said otherwise)."""

    def __init__(self, message, exit_code=exitcodes.USAGE):
        super().__init__(message)
        self.exit_code = exit_code


def _stamp_show(e):
    """Make click print this error (and its usage hint) with a timestamp on every line, like a log line."""
    plain = e.show

    def show(file=None):
        buf = io.StringIO()
        plain(buf)
        click.echo(logs.stamped(buf.getvalue().rstrip("\n")), file=file, err=file is None)

    e.show = show


class Group(click.Group):
    """The command group; its only addition is the timestamp on click's own `Error:` lines."""

    def make_context(self, *args, **kwargs):
        try:
            return super().make_context(*args, **kwargs)
        except click.ClickException as e:
            _stamp_show(e)
            raise

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except click.ClickException as e:
            _stamp_show(e)
            raise


def _say(text):
    """A command's result line, timestamped like the log lines around it in a cron log."""
    click.echo(logs.stamped(text))


def _settings(ctx, **values):
    """Validated settings from the global options plus this command's."""
    from scraper.db import store
    try:
        s = settings.build(**ctx.obj, **values)
        if os.path.isfile(s.db_path) and os.path.getsize(s.db_path):
            store.check_readable(s.db_path)  # a damaged file is refused before anything runs
        return s
    except ConfigError as e:
        raise Failure(str(e)) from None


@contextlib.contextmanager
def _existing_db(s):
    """`with _existing_db(s) as conn:` the database of a command that needs one already (status never
    creates one), closed at the end; a ConfigError from the library becomes the command's one sentence."""
    from scraper.db import store
    if not os.path.exists(s.db_path):
        raise Failure(f"there is no database at {s.db_path}; run `scraper seed` first.")
    try:
        conn = store.open_db(s.db_path)
    except sqlite3.DatabaseError as e:
        raise Failure(f"{s.db_path} cannot be used as a database ({e}).") from None
    try:
        yield conn
    except ConfigError as e:
        raise Failure(str(e)) from None
    finally:
        conn.close()


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--db", "db_path", envvar=settings.ENV_DB, default=settings.DB_PATH, show_default=True,
              help=f"The SQLite database of jobs and results [env {settings.ENV_DB}].")
@click.option("--api-url", envvar=settings.ENV_API_URL, default=settings.API_URL, show_default=True,
              help=f"Base URL of the n8n template API [env {settings.ENV_API_URL}].")
@click.option("--site-url", envvar=settings.ENV_SITE_URL, default=settings.SITE_URL, show_default=True,
              help=f"Base URL of the n8n.io site [env {settings.ENV_SITE_URL}].")
@click.option("--user-agent", envvar=settings.ENV_USER_AGENT, default=settings.USER_AGENT, show_default=True,
              help=f"The User-Agent header; add a contact address, e.g. 'scraper/{__version__} "
                   f"(+mailto:you@example.org)' [env {settings.ENV_USER_AGENT}].")
@click.option("--youtube-url", envvar=settings.ENV_YOUTUBE_URL, default=settings.YOUTUBE_URL, show_default=True,
              help=f"Where requests for https://www.youtube.com go, same path and query "
                   f"[env {settings.ENV_YOUTUBE_URL}].")
@click.option("--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
              default="INFO", show_default=True, help="How much to log on stderr.")
@click.version_option(__version__, prog_name="scraper")
@click.pass_context
def main(ctx, db_path, api_url, site_url, user_agent, youtube_url, log_level):
    """Collect the n8n.io workflow library into one SQLite file, politely and resumably.

    \b
    Example:
        scraper seed --from-search
        scraper run --workers 4
        scraper status
    """
    logs.setup(log_level.upper())
    ctx.obj = {"db_path": db_path, "api_url": api_url, "site_url": site_url, "user_agent": user_agent,
               "youtube_url": youtube_url}


def _job_count(s):
    from scraper.db.queue import Queue
    with _existing_db(s) as conn:
        return sum(Queue(conn).counts().values())


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
@click.option("--timeout", "timeout_s", type=float, default=settings.TIMEOUT_S, show_default=True,
              help="Seconds to wait for a connection or for data, per search page.")
@click.option("--max-attempts", type=int, default=settings.MAX_ATTEMPTS, show_default=True,
              help="With --from-search: attempts per search page before nothing is seeded.")
@click.option("--backoff-base", "backoff_base_s", type=float, default=settings.BACKOFF_BASE_S, show_default=True,
              help="With --from-search: first retry delay of a failing page in seconds; it doubles.")
@click.option("--adopt-urls", is_flag=True,
              help="Move a database seeded from other --api-url/--site-url to these (deliberately).")
@click.pass_context
def seed_cmd(ctx, from_search, ids_file, limit, if_empty, rate_per_s, burst, timeout_s, max_attempts, backoff_base_s,
             adopt_urls):
    """Add one pending job per template. --from-search walks the whole listing and also queues a
    re-fetch of templates whose listing entry changed, of stored templates missing from a complete walk
    (the fetch confirms the removal) and of removed templates listed again (restored).

    \b
    Example:
        scraper seed --from-search --limit 500
        scraper seed --ids my-templates.txt
    """
    from scraper.db import store
    from scraper.db.queue import Queue
    from scraper.mirror import seed, source, sync
    if from_search == bool(ids_file):
        raise Failure("give exactly one of --from-search or --ids FILE.")
    if limit is not None and not from_search:
        raise Failure("--limit goes with --from-search.")
    s = _settings(ctx, rate_per_s=rate_per_s, burst=burst, timeout_s=timeout_s, max_attempts=max_attempts,
                  backoff_base_s=backoff_base_s)
    if os.path.exists(s.db_path):
        _check_source(s, adopt_urls)     # before any request: a database of another site is refused first
    if if_empty and os.path.exists(s.db_path) and _job_count(s) > 0:
        _say("the database already has jobs; nothing seeded.")
        return
    started, had_db = time.time(), os.path.exists(s.db_path)
    try:
        found = seed.read_ids_file(ids_file, s.site_url) if ids_file else seed.discover(s, limit)
    except ConfigError as e:
        raise Failure(str(e)) from None
    except FetchError as e:
        log.debug("search request failed: %s", e)
        _forget_walk(s, had_db)
        raise Failure(_fetch_failure(e, s), exitcodes.FAILED) from None
    except ParseError as e:
        _forget_walk(s, had_db)
        raise Failure(f"{e.url or s.api_url} did not answer with a page of search results ({e}); check "
                      f"--api-url (n8n's is {settings.API_URL}); nothing was seeded.", exitcodes.FAILED) from None
    conn = store.open_db(s.db_path)
    try:
        source.check(conn, s.api_url, s.site_url, adopt_urls, time.time())
        if ids_file:
            new, known = Queue(conn).seed(seed.job_rows(s, found))
        else:
            plan, new, known = sync.apply(conn, s, found, started, time.time())
    except ConfigError as e:
        raise Failure(str(e)) from None
    finally:
        conn.close()
    _say(f"seeded {new} new job(s); {known} already known.")
    if not ids_file:
        walk = "complete" if found.complete else "incomplete, so nothing is taken as removed"
        _say(f"listing: {len(found.entries)} template(s) on {found.pages} page(s), {walk}; "
             f"{len(plan.new)} new, {len(plan.changed)} changed, {len(plan.missing)} removed "
             f"(queued to confirm), {len(plan.restored)} restored.")


def _forget_walk(s, had_db):
    """After a walk that seeded nothing into a folder that had no database: take away the rate-limit
    files it made, so a failed first seed leaves the folder as it found it."""
    if had_db or os.path.exists(s.db_path):
        return
    for path in s.db_files:
        if path != s.db_path:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


def _fetch_failure(e, s):
    """The sentence for a search request that failed: the URL tried, and what to do next."""
    from scraper.policy import retry
    url = e.url or s.api_url
    offline = "check the network or --api-url, or try `make demo` (it needs no internet)"
    if e.kind == retry.TIMEOUT:
        return (f"{url} did not answer within {s.timeout_s:g} s; {offline}, or raise --timeout; "
                f"nothing was seeded.")
    if e.status is not None:
        return (f"{url} answered HTTP {e.status}; check --api-url (n8n's is {settings.API_URL}); "
                f"nothing was seeded.")
    reason = str(e).split(":", 1)[0]
    return f"could not reach {url} ({reason}); {offline}; nothing was seeded."


def _check_source(s, adopt):
    """Refuse (exit 2) a database seeded from other URLs, unless `adopt`; record them on first use."""
    from scraper.mirror import source
    with _existing_db(s) as conn:
        source.check(conn, s.api_url, s.site_url, adopt, time.time())


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
@click.option("--adopt-urls", is_flag=True,
              help="Move a database seeded from other --api-url/--site-url to these (deliberately).")
@click.option("--transcripts/--no-transcripts", default=True, show_default=True, envvar=settings.ENV_TRANSCRIPTS,
              help=f"Fetch the transcript of every template's YouTube videos [env {settings.ENV_TRANSCRIPTS}=0/1].")
@click.option("--transcript-languages", default=",".join(settings.TRANSCRIPT_LANGUAGES), show_default=True,
              help="Preferred transcript languages, comma-separated; without a match any manual transcript, "
                   "then any generated one, is taken.")
@click.option("--domain-rate", "domain_rates", multiple=True, metavar="DOMAIN=RATE/BURST",
              help=f"A domain's own requests per second and burst; repeatable [default youtube.com="
                   f"{settings.YOUTUBE_RATE_PER_S:g}/{settings.YOUTUBE_BURST}, any other domain --rate/--burst].")
@click.pass_context
def run_cmd(ctx, no_limit, adopt_urls, transcript_languages, domain_rates, **options):
    """Work through the pending jobs with N worker processes until no job is running and no pending one
    is left, except those of a domain the run gave up (it waits through backoffs, 429 pauses and open
    breakers).

    Each stored template queues one job per YouTube video it shows (once for the whole library); those
    fetch the video's transcript from youtube.com under that domain's own budget.

    Exit codes: 0 every job done or invalid; 1 some job in the database is failed; 2 usage or configuration
    error; 3 some jobs were left pending because their domain kept failing; 70 workers kept crashing at
    start; 75 another run holds this database; 130/143 stopped by Ctrl-C/SIGTERM. The last line says
    what to do next.

    \b
    Example:
        scraper run --workers 4 --rate 2 --burst 5
        scraper run --transcript-languages en,de --domain-rate youtube.com=0.5/3
        scraper run --no-transcripts
    """
    from scraper.policy import outcome
    from scraper.pool import supervisor
    try:
        rates = tuple(settings.parse_domain_rate(text) for text in domain_rates)
    except ConfigError as e:
        raise Failure(str(e)) from None
    s = _settings(ctx, limiter=not no_limit, domain_rates=rates,
                  transcript_languages=settings.parse_languages(transcript_languages), **options)
    if not os.path.exists(s.db_path):
        raise Failure(f"there is no database at {s.db_path}; run `scraper seed` first.")
    _check_source(s, adopt_urls)
    try:
        code = supervisor.run(s)
    except RunLocked as e:
        step = outcome.next_step(exitcodes.LOCKED).removeprefix("next: ")
        raise Failure(f"{str(e).rstrip('.')}; {step}", exitcodes.LOCKED) from None
    log.info("%s", _next_step(s, code))
    ctx.exit(code)


def _next_step(s, code):
    """The run's last line: what to do now, from the exit code and what the database holds."""
    from scraper.db import store
    from scraper.db.queue import Queue
    from scraper.policy import outcome
    try:
        conn = store.connect(s.db_path)
        try:
            queue = Queue(conn)
            failed, now = queue.counts()["failed"], time.time()
            stuck = {name: b.open_until - now for name, b in queue.domains().items() if b.state != "closed"}
        finally:
            conn.close()
    except sqlite3.Error:
        failed, stuck = 0, {}
    return outcome.next_step(code, failed, sorted(stuck), max(stuck.values(), default=None))


@main.command("status")
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
    s = _settings(ctx)
    if not watch:
        report = _status_report(s)
        click.echo(json.dumps(report, indent=2) if as_json else status.render(report))
        return
    terminal = logs.is_terminal(sys.stdout)
    try:
        while True:
            report = _status_report(s)
            if as_json:
                click.echo(json.dumps(report))
            else:
                click.echo((CLEAR_SCREEN if terminal else "") + f"status at {logs.stamp()}\n" + status.render(report)
                           + ("" if terminal else "\n"))
            time.sleep(WATCH_EVERY_S)
    except KeyboardInterrupt:       # Ctrl-C is how a watch ends: not an error
        return


def _status_report(s):
    from scraper.db import runstate
    from scraper.db.queue import Queue
    from scraper.products import status
    with _existing_db(s) as conn:
        return status.report(Queue(conn), time.time(), runstate.current(conn, s.lock_path))


@main.command("retry")
@click.option("--failed", is_flag=True, help="Rows that ended failed (the default when no flag is given).")
@click.option("--invalid", is_flag=True, help="Rows that ended invalid (404/410).")
@click.option("--all", "all_", is_flag=True, help="Both failed and invalid rows.")
@click.pass_context
def retry_cmd(ctx, failed, invalid, all_):
    """Move finished-but-unsuccessful rows back to pending, their attempts reset. The flags add up:
    `--failed --invalid` moves both.

    \b
    Example (cron, before the run):
        scraper retry --failed; scraper run
    """
    from scraper.db.queue import Queue
    s = _settings(ctx)
    statuses = tuple(name for name, on in (("failed", failed or all_ or not invalid), ("invalid", invalid or all_))
                     if on)
    with _existing_db(s) as conn:
        n = Queue(conn).retry(statuses)
    _say(f"moved {n} {'/'.join(statuses)} job(s) back to pending.")


@main.command("failures")
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
    s = _settings(ctx)
    with _existing_db(s) as conn:
        rows = failures.listing(conn, limit)
        total = sum(n for st, n in Queue(conn).counts().items() if st in ("failed", "invalid"))
    click.echo(json.dumps(rows, indent=2) if as_json else failures.render(rows, total))


@main.command("export")
@click.option("--format", "fmt", type=click.Choice(export.FORMATS), required=True, help="Output format.")
@click.option("--output", "-o", type=click.Path(dir_okay=False),
              help="Write to this file (default: stdout; parquet needs a file).")
@click.option("--columns", help="Comma-separated columns to export, in this order (default: all).")
@click.option("--no-redact", is_flag=True, help="Keep credentials as stored (by default they become [REDACTED]).")
@click.option("--live-only", is_flag=True, help="Leave out templates removed from n8n.io.")
@click.pass_context
def export_cmd(ctx, fmt, output, columns, no_redact, live_only):
    """Stream the workflows table as JSON Lines, JSON, CSV or Parquet (needs pyarrow: pip install
    'scraper[parquet]').

    CSV is made for spreadsheets: formula-safe, without the workflow JSON unless --columns names it,
    and any cell over 32,767 characters cut with a visible mark.

    Credentials in the workflows (API keys, tokens, Authorization headers, passwords in URLs, pinData)
    are redacted unless --no-redact is given; stderr says how many.

    JSON Lines, JSON and Parquet give each template its `transcripts` (video_id, language_code,
    is_generated, text); CSV gives their texts joined in one `transcripts` cell.

    \b
    Example:
        scraper export --format jsonl --output workflows.jsonl
        scraper export --format csv --columns id,name,author,quality_score > workflows.csv
        scraper export --format parquet --output workflows.parquet
    """
    s = _settings(ctx)
    with _existing_db(s) as conn:
        chosen = export.choose_columns(conn, columns, fmt)
        if output:
            summary = export.write_file(conn, fmt, output, chosen, redact=not no_redact, live_only=live_only)
            click.echo(logs.stamped(f"exported {summary.rows} workflow(s) to {output}; "
                                    f"{summary.describe(not no_redact)}"), err=True)
        else:
            summary = export.write(conn, fmt, sys.stdout, chosen, redact=not no_redact, live_only=live_only)
            sys.stdout.flush()      # the data first, then the line about it
            click.echo(logs.stamped(f"exported {summary.rows} workflow(s); {summary.describe(not no_redact)}"),
                       err=True)


@main.command("refresh")
@click.option("--older-than", "older_than_days", type=click.IntRange(min=0), default=settings.REFRESH_DAYS,
              show_default=True, help="Queue templates last fetched more than this many days ago (0: all).")
@click.option("--limit", type=click.IntRange(min=1), help="Queue at most this many, the oldest first.")
@click.pass_context
def refresh_cmd(ctx, older_than_days, limit):
    """Queue done templates for a re-fetch, oldest first: catches edits the listing does not show
    (a changed workflow JSON). The next `scraper run` fetches them; a changed one gets a new version.

    \b
    Example:
        scraper refresh --older-than 30 --limit 500 && scraper run
    """
    from scraper.mirror import sync
    s = _settings(ctx)
    with _existing_db(s) as conn:
        n = sync.refresh(conn, older_than_days, limit, time.time())
    _say(f"queued {n} template(s) for a re-fetch.")


@main.command("changes")
@click.option("--since", help="Only changes at or after this time (ISO 8601; no offset means UTC).")
@click.option("--json", "as_json", is_flag=True, help="One JSON array instead of text.")
@click.pass_context
def changes_cmd(ctx, since, as_json):
    """List what changed, oldest first: added, changed (a new version), removed, restored.

    \b
    Example:
        scraper changes --since 2026-11-01
        scraper changes --since 2026-11-25T02:00:00Z --json
    """
    from scraper.mirror import answers, sync
    try:
        since = None if since is None else sync.parse_time(since)
    except ValueError:
        raise Failure(f"--since {since!r} is not an ISO 8601 time (e.g. 2026-11-25 or 2026-11-25T02:00:00Z).") \
            from None
    s = _settings(ctx)
    with _existing_db(s) as conn:
        found = answers.changes(conn, since)
    if as_json:
        click.echo(json.dumps(found, indent=2))
    else:
        for c in found:
            click.echo(f"{c['at']}  {c['change']:<8}  {c['id']}")


@main.command("history")
@click.argument("template_id", metavar="ID", type=click.IntRange(min=1))
@click.option("--json", "as_json", is_flag=True, help="One JSON array instead of text.")
@click.pass_context
def history_cmd(ctx, template_id, as_json):
    """List the stored versions of one template, oldest first.

    \b
    Example:
        scraper history 1234
        scraper history 1234 --json
    """
    from scraper.mirror import answers
    s = _settings(ctx)
    with _existing_db(s) as conn:
        versions = answers.history(conn, template_id)
    if not versions:
        raise Failure(f"template {template_id} has no stored version.")
    if as_json:
        click.echo(json.dumps(versions, indent=2))
    else:
        for v in versions:
            click.echo(f"version {v['version']}  {v['fetched_at']}  {v['content_hash']}")


@main.command("reextract")
@click.pass_context
def reextract_cmd(ctx):
    """Rebuild every workflows row from the stored answers, sending no request (after an extractor fix).

    \b
    Example:
        scraper reextract
    """
    from scraper.mirror import answers
    s = _settings(ctx)
    with _existing_db(s) as conn:
        try:
            rebuilt, without = answers.reextract(conn)
        except ParseError as e:
            raise Failure(f"a stored answer cannot be extracted any more ({e}); nothing after it was rebuilt.",
                          exitcodes.FAILED) from None
    extra = f"; {without} stored before answers were kept, left as they are" if without else ""
    _say(f"rebuilt {rebuilt} workflow row(s) from stored answers{extra}.")


@main.command("search")
@click.argument("query")
@click.option("--limit", type=click.IntRange(min=1), default=search.LIMIT, show_default=True,
              help="At most this many templates.")
@click.option("--json", "as_json", is_flag=True, help="A JSON array of {id, name, snippet, rank} instead of text.")
@click.pass_context
def search_cmd(ctx, query, limit, as_json):
    """Full-text search of the stored templates (name, description, explainer, node types, categories,
    author, video transcripts), best match first (bm25; `rank` is lower for a better match), with snippets.

    QUERY is SQLite FTS5 syntax: words (all must match), "a phrase", OR, NOT, prefix*, and
    column:word for one column (name, description, explainer, node_types, categories, author,
    transcripts).

    \b
    Example:
        scraper search slack
        scraper search 'telegram AND openai' --limit 5
        scraper search 'node_types:googleSheets' --json | jq '.[].id'
    """
    s = _settings(ctx)
    with _existing_db(s) as conn:
        results = search.query(conn, query, limit)
    click.echo(json.dumps(results, indent=2, ensure_ascii=False) if as_json else search.render(query, results))


@main.command("stats")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (every row of every ranking) instead of text.")
@click.pass_context
def stats_cmd(ctx, as_json):
    """Statistics of the stored templates: node types and categories by the number of templates that
    use them, authors, templates created per month, quality scores, videos and transcript coverage.

    \b
    Example:
        scraper stats
        scraper stats --json | jq '.node_types[:10]'
    """
    from scraper.products import stats
    s = _settings(ctx)
    with _existing_db(s) as conn:
        report = stats.report(conn)
    click.echo(json.dumps(report, indent=2, ensure_ascii=False) if as_json else stats.render(report))


@main.command("report")
@click.option("--output", "-o", type=click.Path(dir_okay=False), required=True, help="The HTML file to write.")
@click.option("--run", "run_id", type=int, help="The run whose time charts to show (default: the latest).")
@click.pass_context
def report_cmd(ctx, output, run_id):
    """Write one self-contained HTML page (no network needed to view it) with charts: templates done over
    time, request rate against the limit, errors by kind, answer latency, quality scores, top node types
    and the history of runs.

    \b
    Example:
        scraper report --output report.html
        scraper report --run 3 -o run3.html
    """
    from scraper.products import report
    s = _settings(ctx)
    with _existing_db(s) as conn:
        size = report.write(conn, output, time.time(), run_id)
    click.echo(logs.stamped(f"wrote the report to {output} ({size / 1024:.0f} KB)."), err=True)
