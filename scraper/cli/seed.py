"""`scraper seed`: queue jobs, by walking the due sources (or those named), the n8n listing, or a file of ids."""

import contextlib
import logging
import os
import time

import click

from scraper.base import exitcodes, settings
from scraper.base.errors import ConfigError, DomainResting, FetchError, ParseError, RobotsDisallowed, RobotsUnavailable
from scraper.cli.common import (
    Failure,
    command_settings,
    db_exists,
    existing_db,
    fetch_failure,
    log,
    say,
    setting_options,
)

# the settings a walk uses, shown in `seed --help` (also `update`'s walk step takes them from `run`'s)
WALK_SETTINGS = ("rate", "burst", "timeout", "max_attempts", "backoff_base", "robots", "robots_ignore")
UNNAMED_SAID = "scraper.unnamed_said"   # root ctx.meta: said once per command (`update` checks at each step)


def _job_count(s):
    from scraper.db.queue import Queue
    with existing_db(s) as conn:
        return sum(Queue(conn).counts().values())


@click.command("seed")
@click.option("--from-search", is_flag=True, help="Walk the n8n source now: page through the search API and add "
                                                  "every template id.")
@click.option("--ids", "ids_file", type=click.Path(dir_okay=False),
              help="A file of template ids or n8n.io workflow URLs, one per line.")
@click.option("--source", "source_names", multiple=True, metavar="NAME",
              help="Walk this source now, whatever its cadence; repeatable.")
@click.option("--limit", type=click.IntRange(min=1), help="With --from-search: stop after this many templates.")
@click.option("--if-empty", is_flag=True, help="Do nothing when the database already has jobs.")
@click.option("--adopt-urls", is_flag=True,
              help="Move a database seeded from other --api-url/--site-url (or a catalogue walked from "
                   "another site) to these (deliberately).")
@setting_options(*WALK_SETTINGS)
@click.pass_context
def seed_cmd(ctx, from_search, ids_file, source_names, limit, if_empty, adopt_urls, **flags):
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
    s = command_settings(ctx, flags)
    without_browser(s, logging.WARNING)    # before any work; a walk needs no browser: its pages are queued
    if (from_search or ids_file) and not any(src.kind == "n8n" for src in s.sources):
        raise Failure(f"{'--from-search' if from_search else '--ids'} needs an n8n source, and "
                      f"{s.sources_path} has none.")
    if (from_search or ids_file) and db_exists(s):
        check_source(s, adopt_urls)     # before any request: a database of another site is refused first
    if if_empty and db_exists(s) and _job_count(s) > 0:
        say("the database already has jobs; nothing seeded.")
        return
    if not (from_search or ids_file):
        _walk_sources(ctx, s, source_names or None, adopt_urls)
        return
    started, had_db = time.time(), db_exists(s)
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
            raise Failure(fetch_failure(cause, s), exitcodes.FAILED) from None
        raise Failure(f"{e}; nothing was seeded (--robots-ignore DOMAIN ignores its rules knowingly).",
                      exitcodes.FAILED) from None
    except DomainResting as e:
        _forget_walk(s, had_db)
        raise Failure(f"{e}; nothing was seeded.", exitcodes.FAILED) from None
    except FetchError as e:
        log.debug("search request failed: %s", e)
        _forget_walk(s, had_db)
        raise Failure(fetch_failure(e, s), exitcodes.FAILED) from None
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
    say(f"seeded {new} new job(s); {known} already known.")
    if not ids_file:
        walk = "complete" if found.complete else "incomplete, so nothing is taken as removed"
        say(f"listing: {len(found.entries)} template(s) on {found.pages} page(s), {walk}; "
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
        say_unnamed(conn, s)
        outcomes = walks.walk_due(conn, s, time.time(), names, adopt)
    except ConfigError as e:
        conn.close()
        _forget_db(s, had_db)
        raise Failure(str(e)) from None
    conn.close()
    failed = [o for o in outcomes if o.error]
    if not outcomes:
        say("no source is enabled; nothing sent.")
    for o in outcomes:
        name = o.source.name
        if o.error:
            log.error("%s: the walk failed: %s; nothing of it was seeded.", name, o.error)
        elif o.skipped:
            continue    # walks.walk_due logged it; not a failure
        elif o.result is None:
            say(f"{name}: not due until {walks.iso(o.next_due_at)} (every {o.source.every}); nothing sent.")
        else:
            r = o.result
            state = "complete" if r.complete else "incomplete, so nothing is taken as removed"
            left = getattr(r, "left_out", 0)
            say(f"{name}: walked ({state}, {r.requests} request(s)): {r.new} new, {r.changed} changed, "
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
        with existing_db(s) as conn:
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


def check_source(s, adopt):
    """Refuse (exit 2) a database seeded from other URLs (the n8n source's, or a catalogue's site), unless
    `adopt`; record them on first use."""
    from scraper.mirror import source
    with existing_db(s) as conn:
        say_unnamed(conn, s)
        if any(src.kind == "n8n" for src in s.sources):
            source.check(conn, s.api_url, s.site_url, adopt, time.time())
        for src in s.sources:
            if src.kind == "catalogue" and src.enabled:
                source.check_site(conn, src, adopt, time.time())


def say_unnamed(conn, s):
    """Warn (once per command) of each source whose jobs the database holds but the configured source set
    leaves out: their jobs would be neither walked nor worked without a word."""
    from scraper.mirror import source
    meta = click.get_current_context().find_root().meta
    if meta.get(UNNAMED_SAID):
        return
    meta[UNNAMED_SAID] = True
    for sentence in source.unnamed_warnings(conn, s):
        log.warning("%s", sentence)


def without_browser(s, level=logging.ERROR):
    """Say in one sentence, before any work, which sources of this run need a browser that cannot be
    started; returns their names (the run leaves their jobs pending and exits 3)."""
    from scraper.net import chromium
    sentence, names = chromium.sources_without_browser(s, s.working_sources)
    if sentence:
        log.log(level, "%s", sentence)
    return names
