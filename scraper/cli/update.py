"""`scraper update`: the cron job in one process: the walk, then `retry --failed` (old failures only), then
`run`; its exit code is the most serious of its steps."""

import time

import click

from scraper.base import exitcodes
from scraper.base.errors import Stopped
from scraper.cli.common import (
    SIGNAL_NAMES,
    Failure,
    db_exists,
    existing_db,
    health,
    log,
    raising_on_signals,
    say,
    setting_options,
)
from scraper.cli.run import HEALTH_OWNED, checked_source, run_cmd, run_settings
from scraper.cli.seed import seed_cmd

# most serious first: a crashing pool, a full disk, the database gone, failed rows, a domain given up, a held
# lock, success
SERIOUSNESS = (exitcodes.CRASHING, exitcodes.DISK_FULL, exitcodes.DB_DOWN, exitcodes.FAILED, exitcodes.GAVE_UP,
               exitcodes.LOCKED, exitcodes.OK)
WALK = "the walk (seed)"
RETRY = "retry --failed"
RUN = "the run"


def most_serious(steps):
    """(code, step) of the step whose code comes first in SERIOUSNESS (the earlier step on a tie);
    `steps` is [(step, code)]; (0, None) when every step exited 0."""
    rank = {code: i for i, code in enumerate(SERIOUSNESS)}
    step, code = min(steps, key=lambda sc: rank.get(sc[1], 0))
    return code, (None if code == exitcodes.OK else step)


def _outcome(call):
    """Run one step (a click callback that may exit or fail); its exit code, its failure logged."""
    try:
        call()
    except click.exceptions.Exit as e:
        return e.exit_code
    except Failure as e:
        log.error("%s", e.message)
        return e.exit_code
    return exitcodes.OK


def walk(ctx, run_options):
    """The walk step: every enabled source that is due (a bare `seed`: a source that is not due sends
    nothing), with run's budget and timeouts; returns its exit code."""
    names = {p.name for p in seed_cmd.params} - {"source_names"}     # run's --source limits the run only
    shared = {k: v for k, v in run_options.items() if k in names}
    return _outcome(lambda: ctx.invoke(seed_cmd, **shared))


def retry_old_failures(s, retry_after_h, now):
    """The retry step: failed rows whose last failure is older than `retry_after_h` hours go back to
    pending (a 401/403 is not fetched again every 15 minutes)."""
    from scraper.db.queue import Queue
    with existing_db(s) as conn:
        queue = Queue(conn)
        moved = queue.retry(("failed",), now, finished_before=now - retry_after_h * 3600)
        left = queue.counts()["failed"]
    say(f"moved {moved} failed job(s) back to pending; {left} that failed within {retry_after_h:g} h "
         f"left for a later update.")
    return exitcodes.OK


def _update_options(command):
    """`update` takes every option of `run` (including those added to run later), then its own."""
    command.params = [*run_cmd.params, *command.params]
    return command


@_update_options
@click.command("update")
@setting_options("retry_after")
@click.pass_context
def update_cmd(ctx, **run_options):
    """The walk (new, changed and removed templates), then `retry --failed` for failures older than
    retry_after hours, then `run`, in one process: the command for cron. It takes every option of `run`.

    Exit code: the most serious of its steps, in this order: 70, 74, 1, 3, 75, 0. A usage error (2) stops it
    before anything runs; Ctrl-C/SIGTERM stop it at once (130/143). When the walk fails on a database that
    does not exist yet nothing else runs. The last line names the step that set the code (or says that every
    step succeeded).

    \b
    Example (cron):
        scraper update --workers 4 >> /var/log/scraper/scraper.log 2>&1
    """
    flags = {k: v for k, v in run_options.items() if k not in ("run_sources", "adopt_urls")}
    s = run_settings(ctx, run_options["run_sources"], flags)     # any usage error (2) before anything runs
    if db_exists(s):
        checked_source(s, run_options["adopt_urls"])
    with health(s, "update") as pings:          # one start ping and one end ping for the whole update
        ctx.meta[HEALTH_OWNED] = True           # its run step sends none of its own
        code, step = _steps(ctx, s, s.retry_after_h, {k: v for k, v in run_options.items() if k != "retry_after"})
        # success is every step's: naming one of them would say it alone decided
        line = ("update finished: exit 0, every step succeeded" if code == exitcodes.OK and step is None
                else f"update finished: exit {code}, set by {step}")
        log.info("%s", line)
        pings.finished(code, line, _counts(s))
    ctx.exit(code)


def _steps(ctx, s, retry_after_h, run_options):
    """Run the steps; (the exit code, the step that set it)."""
    steps, current = [], WALK
    try:
        with raising_on_signals():
            had_db = db_exists(s)    # a PostgreSQL URL is no file: its schema tells
            steps.append((WALK, walk(ctx, run_options)))
            if steps[-1][1] == exitcodes.USAGE:
                return exitcodes.USAGE, WALK
            if not had_db and not db_exists(s):
                log.error("update: the walk made no database, so nothing else runs")
                return steps[-1][1], WALK
            current = RETRY
            steps.append((RETRY, retry_old_failures(s, retry_after_h, time.time())))
            current = RUN
            steps.append((RUN, _outcome(lambda: ctx.invoke(run_cmd, **run_options))))
    except Stopped as e:
        log.warning("update stopped by %s during %s", SIGNAL_NAMES[e.signum], current)
        return e.code, current
    if steps[-1][1] in (exitcodes.SIGINT, exitcodes.SIGTERM, exitcodes.USAGE):
        return steps[-1][1], RUN
    return most_serious(steps)


def _counts(s):
    """The job counts for a notification (empty when there is no database)."""
    from scraper.db.queue import Queue
    if not db_exists(s):
        return {}
    with existing_db(s) as conn:
        return Queue(conn).counts()

