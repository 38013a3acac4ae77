"""Commands that fill and work the queue: seed, run, retry."""

import contextlib
import dataclasses
import logging
import os
import sqlite3
import time

import click

from scraper.base import exitcodes, settings
from scraper.base.errors import ConfigError, FetchError, ParseError, RobotsDisallowed, RobotsUnavailable, RunLocked
from scraper.cli.common import (
    Failure,
    _db_exists,
    _existing_db,
    _fetch_failure,
    _health,
    _robots_values,
    _say,
    _settings,
    log,
    robots_options,
)


def _job_count(s):
    from scraper.db.queue import Queue
    with _existing_db(s) as conn:
        return sum(Queue(conn).counts().values())

HEALTH_OWNED = "scraper.health_owned"   # ctx.meta: a caller (`update`) sends the pings of the whole command


@click.command("seed")
@click.option("--from-search", is_flag=True, help="Walk the n8n source now: page through the search API and add "
                                                  "every template id.")
@click.option("--ids", "ids_file", type=click.Path(dir_okay=False),
              help="A file of template ids or n8n.io workflow URLs, one per line.")
@click.option("--source", "source_names", multiple=True, metavar="NAME",
              help="Walk this source now, whatever its cadence; repeatable.")
@click.option("--limit", type=click.IntRange(min=1), help="With --from-search: stop after this many templates.")
@click.option("--if-empty", is_flag=True, help="Do nothing when the database already has jobs.")
@click.option("--rate", "rate_per_s", type=float, default=settings.RATE_PER_S, show_default=True,
              help="Requests per second of a walk (the same shared budget as `run`).")
@click.option("--burst", type=int, default=settings.BURST, show_default=True,
              help="Requests the site allows at once above the rate.")
@click.option("--timeout", "timeout_s", type=float, default=settings.TIMEOUT_S, show_default=True,
              help="Seconds to wait for a connection or for data, per request of a walk.")
@click.option("--max-attempts", type=int, default=settings.MAX_ATTEMPTS, show_default=True,
              help="Attempts per n8n search page before nothing is seeded.")
@click.option("--backoff-base", "backoff_base_s", type=float, default=settings.BACKOFF_BASE_S, show_default=True,
              help="First retry delay of a failing n8n search page in seconds; it doubles.")
@click.option("--adopt-urls", is_flag=True,
              help="Move a database seeded from other --api-url/--site-url (or a catalogue walked from "
                   "another site) to these (deliberately).")
@robots_options
@click.pass_context
def seed_cmd(ctx, from_search, ids_file, source_names, limit, if_empty, rate_per_s, burst, timeout_s, max_attempts,
             backoff_base_s, adopt_urls, robots, robots_ignore):
    """Queue jobs. Without an option, walk every enabled source that is due (never walked, or its last
    complete walk is older than its `every`); a source that is not due sends nothing. --source NAME walks
    that source now. --from-search walks the n8n source's listing now and also queues a re-fetch of
    templates whose listing entry changed, of stored templates missing from a complete walk (the fetch
    confirms the removal) and of removed templates listed again (restored).

    \b
    Example:
        scraper seed
        scraper seed --source events
        scraper seed --from-search --limit 500
        scraper seed --ids my-templates.txt
    """
    from scraper.db import runstate
    if sum((from_search, bool(ids_file), bool(source_names))) > 1:
        raise Failure("give at most one of --from-search, --ids FILE or --source NAME.")
    if limit is not None and not from_search:
        raise Failure("--limit goes with --from-search.")
    s = _settings(ctx, rate_per_s=rate_per_s, burst=burst, timeout_s=timeout_s, max_attempts=max_attempts,
                  backoff_base_s=backoff_base_s, **_robots_values(robots, robots_ignore))
    _without_browser(s, logging.WARNING)    # before any work; a walk needs no browser: its pages are queued
    if (from_search or ids_file) and not any(src.kind == "n8n" for src in s.sources):
        raise Failure(f"{'--from-search' if from_search else '--ids'} needs an n8n source, and "
                      f"{s.sources_path} has none.")
    if (from_search or ids_file) and _db_exists(s):
        _check_source(s, adopt_urls)     # before any request: a database of another site is refused first
    if if_empty and _db_exists(s) and _job_count(s) > 0:
        _say("the database already has jobs; nothing seeded.")
        return
    if not (from_search or ids_file):
        _walk_sources(ctx, s, source_names or None, adopt_urls)
        return
    started, had_db = time.time(), _db_exists(s)
    try:
        lock = runstate.walk_lock(s.db_path, s.n8n_source) if from_search else contextlib.nullcontext(True)
    except ConfigError as e:
        raise Failure(str(e)) from None
    with lock as mine:
        if not mine:
            log.info("another walk of the n8n listing is running on this database; this one is skipped")
            return
        _seed(s, ids_file, limit, adopt_urls, started, had_db)


def _seed(s, ids_file, limit, adopt_urls, started, had_db):
    """The walk (or the ids file) and what it queues, inside the walk lock."""
    from scraper.db import store
    from scraper.db.queue import Queue
    from scraper.mirror import seed, source, sync
    try:
        found = seed.read_ids_file(ids_file, s.site_url) if ids_file else seed.discover(s, limit)
    except ConfigError as e:
        raise Failure(str(e)) from None
    except (RobotsDisallowed, RobotsUnavailable) as e:
        _forget_walk(s, had_db)
        cause = e.__cause__
        if isinstance(cause, FetchError) and cause.status is None:     # no answer at all: the host is down
            raise Failure(_fetch_failure(cause, s), exitcodes.FAILED) from None
        raise Failure(f"{e}; nothing was seeded (--robots-ignore DOMAIN ignores its rules knowingly).",
                      exitcodes.FAILED) from None
    except FetchError as e:
        log.debug("search request failed: %s", e)
        _forget_walk(s, had_db)
        raise Failure(_fetch_failure(e, s), exitcodes.FAILED) from None
    except ParseError as e:
        _forget_walk(s, had_db)
        raise Failure(f"{e.url or s.api_url} did not answer with a page of search results ({e}); check "
                      f"--api-url (n8n's is {settings.API_URL}); nothing was seeded.", exitcodes.FAILED) from None
    try:
        conn = store.open_db(s.db_path)
    except ConfigError as e:
        raise Failure(str(e)) from None
    try:
        source.check(conn, s.api_url, s.site_url, adopt_urls, time.time())
        source.own_n8n_jobs(conn, s)
        if ids_file:
            new, known = Queue(conn).seed(seed.job_rows(s, found))
        else:
            from scraper.mirror import walks
            plan, new, known = sync.apply(conn, s, found, started, time.time())
            walks.record(conn, s.n8n_source, started, time.time(), walks.WalkResult(
                len(plan.new), len(plan.changed), len(plan.missing), len(plan.restored), found.complete,
                found.pages))
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


def _walk_sources(ctx, s, names, adopt):
    """`seed` without --from-search or --ids: walk the due sources (or those named); exit 1 when a walk
    failed, after the others were walked."""
    from scraper.db import store
    from scraper.mirror import walks
    had_db = os.path.exists(s.db_path)
    conn = store.open_db(s.db_path)
    try:
        outcomes = walks.walk_due(conn, s, time.time(), names, adopt)
    except ConfigError as e:
        conn.close()
        _forget_db(s, had_db)
        raise Failure(str(e)) from None
    conn.close()
    failed = [o for o in outcomes if o.error]
    if not outcomes:
        _say("no source is enabled; nothing sent.")
    for o in outcomes:
        name = o.source.name
        if o.error:
            log.error("%s: the walk failed: %s; nothing of it was seeded.", name, o.error)
        elif o.skipped:
            continue    # walks.walk_due logged it; not a failure
        elif o.result is None:
            _say(f"{name}: not due until {walks.iso(o.next_due_at)} (every {o.source.every}); nothing sent.")
        else:
            r = o.result
            state = "complete" if r.complete else "incomplete, so nothing is taken as removed"
            left = getattr(r, "left_out", 0)
            _say(f"{name}: walked ({state}, {r.requests} request(s)): {r.new} new, {r.changed} changed, "
                 f"{r.removed} removed (queued to confirm), {r.restored} restored"
                 + (f"; {left} listed URL(s) left out by include/exclude." if left else "."))
    if failed and len(failed) == len(outcomes):
        _forget_db(s, had_db)
    if failed:
        ctx.exit(exitcodes.FAILED)


def _forget_db(s, had_db):
    """A first walk that seeded nothing leaves the folder as it found it (no database, no limiter files)."""
    if had_db:
        return
    from scraper.db.queue import Queue
    if os.path.exists(s.db_path):
        with _existing_db(s) as conn:
            if sum(Queue(conn).counts().values()):
                return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(s.db_path)
    _forget_walk(s, had_db)


def _forget_walk(s, had_db):
    """After a walk that seeded nothing into a folder that had no database: take away the files it made
    (the database that only held robots.txt, the rate-limit files), so a failed first seed leaves the
    folder as it found it."""
    if had_db or s.postgres:
        return
    for path in s.db_files:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _check_source(s, adopt):
    """Refuse (exit 2) a database seeded from other URLs (the n8n source's, or a catalogue's site), unless
    `adopt`; record them on first use."""
    from scraper.mirror import source
    with _existing_db(s) as conn:
        if any(src.kind == "n8n" for src in s.sources):
            source.check(conn, s.api_url, s.site_url, adopt, time.time())
        for src in s.sources:
            if src.kind == "catalogue" and src.enabled:
                source.check_site(conn, src, adopt, time.time())


@click.command("run")
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
@click.option("--lease", "lease_s", type=float, default=settings.LEASE_S, show_default=True,
              help="Seconds a claimed job stays a worker's between renewals (longer than --timeout); on "
                   "PostgreSQL also how soon the jobs of a run that died on another machine come back.")
@click.option("--with-page", is_flag=True, help="Also fetch each template's n8n.io page (title, og:* tags).")
@click.option("--max-jobs-per-worker", type=int, default=settings.MAX_JOBS_PER_WORKER, show_default=True,
              help="Recycle a worker after this many jobs.")
@click.option("--breaker-failures", type=int, default=settings.BREAKER_FAILURES, show_default=True,
              help="Consecutive failed requests that open a domain's circuit breaker.")
@click.option("--breaker-open", "breaker_open_s", type=float, default=settings.BREAKER_OPEN_S, show_default=True,
              help="Seconds an open breaker waits before one probe.")
@click.option("--max-open-cycles", type=int, default=settings.MAX_OPEN_CYCLES, show_default=True,
              help="Failed probes in a row after which the run stops trying a domain (its jobs stay pending), "
                   "once its breaker has also been open for --give-up-after seconds.")
@click.option("--give-up-after", "give_up_after_s", type=float, default=settings.GIVE_UP_AFTER_S, show_default=True,
              help="Seconds a domain's breaker must have been open before the run gives it up (an outage, not a "
                   "blip); the open period doubles after each failed probe, up to 10 minutes.")
@click.option("--backoff-base", "backoff_base_s", type=float, default=settings.BACKOFF_BASE_S, show_default=True,
              help="First retry delay in seconds; it doubles with each attempt.")
@click.option("--no-limit", is_flag=True, help="Switch the rate limiter off (benchmarks against your own server only).")
@click.option("--adopt-urls", is_flag=True,
              help="Move a database seeded from other --api-url/--site-url to these (deliberately).")
@click.option("--transcripts/--no-transcripts", default=settings.TRANSCRIPTS, show_default=True,
              envvar=settings.ENV_TRANSCRIPTS,
              help=f"Fetch the transcript of every template's YouTube videos (off by default: YouTube's robots.txt "
                   f"disallows the endpoints, see --robots-ignore) [env {settings.ENV_TRANSCRIPTS}=0/1].")
@click.option("--transcript-languages", default=",".join(settings.TRANSCRIPT_LANGUAGES), show_default=True,
              help="Preferred transcript languages, comma-separated; without a match any manual transcript, "
                   "then any generated one, is taken.")
@click.option("--domain-rate", "domain_rates", multiple=True, metavar="DOMAIN=RATE/BURST",
              help=f"A domain's own requests per second and burst (wins over the sources file); repeatable "
                   f"[default youtube.com={settings.YOUTUBE_RATE_PER_S:g}/{settings.YOUTUBE_BURST}, any other "
                   f"domain its sources' rate, else --rate/--burst].")
@click.option("--source", "run_sources", multiple=True, metavar="NAME",
              help="Work only this source's pending jobs; repeatable [default: every enabled source].")
@click.option("--ping-url", envvar=settings.ENV_PING_URL, metavar="URL",
              help=f"Cron monitoring (healthchecks.io, Uptime Kuma): send URL/start at the start, then URL on "
                   f"exit 0 or 75, or URL/fail with the last line [env {settings.ENV_PING_URL}].")
@click.option("--notify-url", envvar=settings.ENV_NOTIFY_URL, metavar="URL",
              help=f'POST {{"text": ...}} (Slack, Mattermost) to this webhook on any exit but 0 and 75 '
                   f"[env {settings.ENV_NOTIFY_URL}].")
@robots_options
@click.option("--adaptive/--no-adaptive", default=True, show_default=True, envvar=settings.ENV_ADAPTIVE,
              help=f"Halve a domain's rate (shared by every worker) while the median of its last 40 answers is "
                   f"over 200 ms and three times its first 40's, or over 20 % of them are 503; it climbs back "
                   f"within --adaptive-recover seconds after [env {settings.ENV_ADAPTIVE}=0/1].")
@click.option("--adaptive-recover", "adaptive_recover_s", type=float, default=settings.ADAPTIVE_RECOVER_S,
              show_default=True, help="Seconds a slowed domain takes to climb back from its floor to its rate.")
@click.pass_context
def run_cmd(ctx, **options):
    """Work through the pending jobs of every enabled source (or those of --source) with N worker
    processes until no job is running and no pending one is left, except those of a domain the run gave
    up (it waits through backoffs, 429 pauses and open breakers). A job of a source with a lower
    priority number goes first whenever its domain can send; the pending jobs of a disabled or removed
    source are neither worked nor waited for.

    With --transcripts, each stored template queues one job per YouTube video it shows (once for the
    whole library); those fetch the video's transcript from youtube.com under that domain's own budget.
    YouTube's robots.txt disallows the transcript endpoints: add --robots-ignore youtube.com knowingly.

    Exit codes: 0 every job done or invalid; 1 some job in the database is failed; 2 usage or configuration
    error; 3 some jobs were left pending because their domain kept failing; 70 workers kept crashing at
    start; 75 another run holds this database; 130/143 stopped by Ctrl-C/SIGTERM. The last line says
    what to do next.

    With --ping-url and --notify-url the run tells your monitoring how it ended; those calls are bounded
    (5 s, 2 tries), never change the exit code, and skip robots.txt and the rate limit (they go to your
    own service).

    \b
    Example:
        scraper run --workers 4 --rate 2 --burst 5
        scraper run --transcript-languages en,de --domain-rate youtube.com=0.5/3
        scraper run --transcripts --robots-ignore youtube.com
        scraper run --source events
    """
    from scraper.policy import outcome
    from scraper.pool import supervisor
    s, adopt_urls = run_settings(ctx, **options)
    with _health(s, "run") if not ctx.meta.get(HEALTH_OWNED) else contextlib.nullcontext() as health:
        if not _db_exists(s):
            raise Failure(f"there is no database at {s.db_shown}; run `scraper seed` first.")
        _check_source(s, adopt_urls)
        s = dataclasses.replace(s, browserless=_without_browser(s))
        try:
            code = supervisor.run(s)
        except RunLocked as e:
            step = outcome.next_step(exitcodes.LOCKED).removeprefix("next: ")
            raise Failure(f"{str(e).rstrip('.')}; {step}", exitcodes.LOCKED) from None
        last, counts = _next_step(s, code)
        log.info("%s", last)
        if health is not None:
            health.finished(code, last, counts)
    ctx.exit(code)


def _without_browser(s, level=logging.ERROR):
    """Say in one sentence, before any work, which sources of this run need a browser that cannot be
    started; returns their names (the run leaves their jobs pending and exits 3)."""
    from scraper.net import chromium
    sentence, names = chromium.sources_without_browser(s, s.working_sources)
    if sentence:
        log.log(level, "%s", sentence)
    return names


def run_settings(ctx, no_limit, adopt_urls, transcript_languages, domain_rates, run_sources=(), robots=settings.ROBOTS,
                 robots_ignore=(), **options):
    """(settings, adopt_urls) from `run`'s options (shared with `update`); a bad value is a Failure (exit 2)."""
    try:
        rates = tuple(settings.parse_domain_rate(text) for text in domain_rates)
    except ConfigError as e:
        raise Failure(str(e)) from None
    s = _settings(ctx, limiter=not no_limit, domain_rates=rates, run_sources=tuple(dict.fromkeys(run_sources)),
                  transcript_languages=settings.parse_languages(transcript_languages),
                  **_robots_values(robots, robots_ignore), **options)
    return s, adopt_urls


def _next_step(s, code):
    """(the run's last line: what to do now, from the exit code and what the database holds; the job counts)."""
    from scraper.db import sources_report, store
    from scraper.db.queue import Queue
    from scraper.policy import outcome
    incomplete = scripted = 0
    try:
        conn = store.connect(s.db_path)
        try:
            queue = Queue(conn)
            counts, now = queue.counts(), time.time()
            stuck = {name: b.open_until - now for name, b in queue.domains().items() if b.state != "closed"}
            if counts.get("failed"):
                incomplete, scripted = sources_report.failed_incomplete(conn)
        finally:
            conn.close()
    except (sqlite3.Error, ConfigError):
        counts, stuck = {}, {}
    return outcome.next_step(code, counts.get("failed", 0), sorted(stuck), max(stuck.values(), default=None),
                             kinds=[src.kind for src in s.working_sources], browserless=s.browserless,
                             incomplete=incomplete, scripted=scripted), counts



@click.command("retry")
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


COMMANDS = (seed_cmd, run_cmd, retry_cmd,)
