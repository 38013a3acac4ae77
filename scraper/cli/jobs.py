"""Commands that fill and work the queue: seed, run, retry."""

import contextlib
import os
import sqlite3
import time

import click

from scraper.base import exitcodes, settings
from scraper.base.errors import ConfigError, FetchError, ParseError, RobotsDisallowed, RobotsUnavailable, RunLocked
from scraper.cli.common import Failure, _existing_db, _say, _settings, log


def robots_options(f):
    """--robots and --robots-ignore, shared by seed and run."""
    f = click.option("--robots-ignore", "robots_ignore", multiple=True, metavar="DOMAIN",
                     envvar=settings.ENV_ROBOTS_IGNORE,
                     help=f"Ignore this domain's robots.txt rules knowingly (a warning at start); repeatable "
                          f"[env {settings.ENV_ROBOTS_IGNORE}, comma-separated]. Transcripts need "
                          f"youtube.com: its robots.txt disallows the library's requests.")(f)
    return click.option("--robots", type=click.Choice(["obey", "ignore"]), default=settings.ROBOTS,
                        show_default=True, envvar=settings.ENV_ROBOTS,
                        help=f"Obey each host's robots.txt (rules, Crawl-delay, Request-rate), or ignore every "
                             f"host's rules with a warning [env {settings.ENV_ROBOTS}].")(f)


def _robots_values(robots, robots_ignore):
    """Settings values of the robots options (an env variable's commas split like repeated options)."""
    return {"robots": robots, "robots_ignore": settings.parse_domains(
        robots_ignore.split(",") if isinstance(robots_ignore, str) else robots_ignore)}


def _job_count(s):
    from scraper.db.queue import Queue
    with _existing_db(s) as conn:
        return sum(Queue(conn).counts().values())


@click.command("seed")
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
@robots_options
@click.pass_context
def seed_cmd(ctx, from_search, ids_file, limit, if_empty, rate_per_s, burst, timeout_s, max_attempts, backoff_base_s,
             adopt_urls, robots, robots_ignore):
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
                  backoff_base_s=backoff_base_s, **_robots_values(robots, robots_ignore))
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
    except (RobotsDisallowed, RobotsUnavailable) as e:
        _forget_walk(s, had_db)
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
    """After a walk that seeded nothing into a folder that had no database: take away the files it made
    (the database that only held robots.txt, the rate-limit files), so a failed first seed leaves the
    folder as it found it."""
    if had_db:
        return
    for path in s.db_files:
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
@click.option("--transcripts/--no-transcripts", default=True, show_default=True, envvar=settings.ENV_TRANSCRIPTS,
              help=f"Fetch the transcript of every template's YouTube videos [env {settings.ENV_TRANSCRIPTS}=0/1].")
@click.option("--transcript-languages", default=",".join(settings.TRANSCRIPT_LANGUAGES), show_default=True,
              help="Preferred transcript languages, comma-separated; without a match any manual transcript, "
                   "then any generated one, is taken.")
@click.option("--domain-rate", "domain_rates", multiple=True, metavar="DOMAIN=RATE/BURST",
              help=f"A domain's own requests per second and burst; repeatable [default youtube.com="
                   f"{settings.YOUTUBE_RATE_PER_S:g}/{settings.YOUTUBE_BURST}, any other domain --rate/--burst].")
@robots_options
@click.option("--adaptive/--no-adaptive", default=True, show_default=True, envvar=settings.ENV_ADAPTIVE,
              help=f"Halve a domain's rate (shared by every worker) while its answers slow down threefold or "
                   f"over 10 % are 503; it climbs back within 60 s after [env {settings.ENV_ADAPTIVE}=0/1].")
@click.pass_context
def run_cmd(ctx, no_limit, adopt_urls, transcript_languages, domain_rates, robots, robots_ignore, **options):
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
                  transcript_languages=settings.parse_languages(transcript_languages),
                  **_robots_values(robots, robots_ignore), **options)
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
