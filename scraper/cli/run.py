"""`scraper run`: work the pending jobs with a pool of worker processes."""

import contextlib
import dataclasses
import time

import click

from scraper.base import exitcodes
from scraper.base.errors import ConfigError, DatabaseError, DiskFull, RunLocked
from scraper.cli.common import Failure, command_settings, db_exists, health, log, setting_options
from scraper.cli.seed import check_source, without_browser

HEALTH_OWNED = "scraper.health_owned"   # ctx.meta: a caller (`update`) sends the pings of the whole command
# `run --help` shows the operator's everyday settings; the others are still accepted (the old flags of
# crontabs) and all of them can be set by key (`--set`, SCRAPER_<KEY>, scraper.toml)
SHOWN = ("workers", "rate", "burst", "timeout", "max_attempts", "memory_limit", "robots", "robots_ignore",
         "transcripts", "ping_url")
HIDDEN = ("max_answer_mb", "inflight", "lease", "with_page", "max_jobs_per_worker", "breaker_failures", "breaker_open",
          "max_open_cycles", "give_up_after", "backoff_base", "no_limit", "transcript_languages", "domain_rate",
          "notify_url", "adaptive", "adaptive_recover", "proxies", "proxy_check_url", "proxy_quarantine", "etl_url",
          "etl_key", "revalidate", "revalidate_sample", "browser_endpoint", "browser_sessions",
          "browser_session_pages", "browser_session_timeout", "browser_wait", "browserbase_url", "browserbase_key",
          "browserbase_project", "db_down_after", "db_connect_timeout", "db_keepalive", "db_statement_timeout",
          "min_free_mb", "lock_report_after")


@click.command("run")
@setting_options(*SHOWN[:3])
@click.option("--source", "run_sources", multiple=True, metavar="NAME",
              help="Work only this source's pending jobs; repeatable [default: every enabled source].")
@setting_options(*SHOWN[3:], hidden=HIDDEN)
@click.option("--adopt-urls", is_flag=True,
              help="Move a database seeded from other api_url/site_url to these (deliberately).")
@click.pass_context
def run_cmd(ctx, run_sources, adopt_urls, **flags):
    """Work through the pending jobs of every enabled source (or those of --source) with N worker
    processes until no job is running and no pending one is left, except those of a domain the run gave
    up (it waits through backoffs, 429 pauses and open breakers). A job of a source with a lower
    priority number goes first whenever its domain can send; the pending jobs of a disabled or removed
    source are neither worked nor waited for.

    Every setting of a run has a key (`scraper config` lists them); the options below are the everyday
    ones, and any other is set with --set KEY=VALUE, SCRAPER_<KEY> or scraper.toml's [scraper] table.

    With --transcripts, each stored template queues one job per YouTube video it shows (once for the
    whole library); those fetch the video's transcript from youtube.com under that domain's own budget.
    YouTube's robots.txt disallows the transcript endpoints: add --robots-ignore youtube.com knowingly.

    Exit codes: 0 every job done or invalid; 1 some job in the database is failed; 2 usage or configuration
    error; 3 some jobs were left pending because their domain kept failing; 70 workers kept crashing at
    start; 74 the disk under the database is full or under min_free_mb; 75 another run holds this
    database; 130/143 stopped by Ctrl-C/SIGTERM. The last line says what to do next.

    With --ping-url (and notify_url) the run tells your monitoring how it ended; those calls are bounded
    (5 s, 2 tries), never change the exit code, and skip robots.txt and the rate limit (they go to your
    own service).

    \b
    Example:
        scraper run --workers 4 --rate 2 --burst 5
        scraper --set transcript_languages=en,de --set domain_rate=youtube.com=0.5/3 run
        scraper run --transcripts --robots-ignore youtube.com
        scraper run --source events
    """
    from scraper.policy import outcome
    from scraper.pool import relay, supervisor
    s = run_settings(ctx, run_sources, flags)
    with health(s, "run") if not ctx.meta.get(HEALTH_OWNED) else contextlib.nullcontext() as pings:
        if not db_exists(s):
            raise Failure(f"there is no database at {s.db_shown}; run `scraper seed` first.")
        checked_source(s, adopt_urls)
        try:
            _ = s.browsers  # the sources this run renders agree on one local and one remote browser
        except ConfigError as e:
            raise Failure(str(e)) from None
        # the run's endpoint stands for its sources' when none renders (as `browser_of(None)` does)
        kinds = {plan.endpoint.kind for plan in s.browsers.values()} or {s.browser_endpoint.kind}
        if "browserbase" in kinds and s.browserbase_key is None:
            raise Failure("browser_endpoint browserbase needs Browserbase's API key: set SCRAPER_BROWSERBASE_KEY "
                          "in the environment.")
        # a source that needs a browser none can start is not worked: its jobs wait for the next run
        browserless = without_browser(s)
        if browserless:
            s = dataclasses.replace(s, run_sources=tuple(src.name for src in s.working_sources
                                                         if src.name not in browserless))
        if s.uses_proxies and s.transcripts:
            log.warning("proxies: the transcript requests to youtube.com are sent by the YouTube library, not "
                        "through the proxy pool (HTTP(S)_PROXY still apply to them); every other request is")
        try:
            with relay.beside(s):
                code = supervisor.run(s, browserless)
        except RunLocked as e:
            step = outcome.next_step(exitcodes.LOCKED).removeprefix("next: ")
            raise Failure(f"{str(e).rstrip('.')}; {step}", exitcodes.LOCKED) from None
        last, counts = _next_step(s, code, browserless)
        log.info("%s", last)
        if pings is not None:
            pings.finished(code, last, counts)
    ctx.exit(code)


def checked_source(s, adopt_urls):
    """`check_source` (the run's first write, before the supervisor, which says a full disk itself): a full
    disk is one sentence and exit 74."""
    from scraper.policy import outcome
    try:
        check_source(s, adopt_urls)
    except DiskFull as e:
        from scraper.db import disk
        step = outcome.next_step(exitcodes.DISK_FULL).removeprefix("next: ")
        raise Failure(f"SQLite says the disk under {disk.folder(s.db_path)} is full ({e}); {step}",
                      exitcodes.DISK_FULL) from None


def run_settings(ctx, run_sources, flags):
    """The settings of `run` (and `update`) from every layer and its setting flags; a bad value is a Failure."""
    return command_settings(ctx, flags, run_sources=tuple(dict.fromkeys(run_sources)) or None)


def _next_step(s, code, browserless):
    """(the run's last line: what to do now, from the exit code and what the database holds; the job counts)."""
    from scraper.db import sources_report, store
    from scraper.db.queue import Queue
    from scraper.policy import outcome
    incomplete = scripted = unrendered = 0
    refused = None
    counts, stuck = {}, {}
    if code != exitcodes.DB_DOWN:       # after exit 69 there is nothing to read: the database is what is missing
        try:
            conn = store.connect(s.db_path)
            try:
                queue = Queue(conn)
                counts, now = queue.counts(), time.time()
                stuck = {name: b.open_until - now for name, b in queue.domains().items() if b.state != "closed"}
                if counts.get("failed"):
                    incomplete, scripted = sources_report.failed_incomplete(conn)
                    unrendered, refused = sources_report.failed_browser_unavailable(conn)
            finally:
                conn.close()
        except (DatabaseError, ConfigError):
            counts, stuck = {}, {}
    return outcome.next_step(code, counts.get("failed", 0), sorted(stuck), max(stuck.values(), default=None),
                             kinds=[src.kind for src in s.working_sources], browserless=browserless,
                             incomplete=incomplete, scripted=scripted, unrendered=unrendered,
                             refused=refused), counts
