"""Webhook (and ETL API) delivery beside a run (`run`, and `update` through it): a process of its own that delivers the
outbox as the run writes it (`mirror/delivery`), so a receiver that is slow or down never holds a worker.

It starts before the supervisor (which leaves a child it did not start alone), stops on SIGTERM after a
last pass (the run's final events, `run.finished` among them, go out before the command returns), and on
its own when its parent is gone (a `kill -9` of the run): the next run or `scraper deliver` goes on from
each endpoint's cursor, so nothing is lost either way.
"""

import contextlib
import logging
import multiprocessing
import os
import signal
import time

log = logging.getLogger(__name__)

NAP_S = 0.05                # how soon an idle relay notices its stop
STOP_WAIT_S = 45.0          # the last pass: a few batches, each bounded by its endpoint's timeout (15 s)


def _main(settings, parent):
    from scraper.db import store
    from scraper.mirror import delivery, etl
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, signal.SIG_IGN)         # a Ctrl-C is the run's: it stops us with SIGTERM
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})    # a stop sent before now arrives here

    def stop():
        return bool(stopping) or os.getppid() != parent

    from scraper.base.errors import DatabaseDown, DatabaseUnavailable
    from scraper.pool.outage import Outage
    try:
        conn = store.connect(settings.db_path, store.run_link(settings))
    except DatabaseUnavailable as e:
        log.error("webhook delivery did not start (%s); `scraper deliver` goes on from each endpoint's cursor", e)
        return
    outage = Outage(settings, "webhook delivery", lambda: store.ping(conn), stop)
    try:
        reporter = etl.Reporter.of(conn, settings)
        to_etl = None if reporter is None else (etl.endpoint(settings), reporter)
        while True:
            try:
                delivery.deliver(conn, settings.webhooks, follow=True, stop=stop, etl=to_etl,
                                 sleep=lambda s: _nap(s, stop))
                break
            except DatabaseUnavailable as e:    # the database's outage: wait for it, then go on from the cursors
                if not outage.wait(e):
                    break
        if stopping:
            delivery.deliver(conn, settings.webhooks, etl=to_etl)
    except DatabaseDown:
        log.warning("webhook delivery stops: the database stayed unreachable past db_down_after; `scraper deliver` "
                    "goes on from each endpoint's cursor")
    except DatabaseUnavailable as e:    # its last pass, after the run, while the database is away
        log.warning("webhook delivery stopped: %s; `scraper deliver` goes on from each endpoint's cursor", e)
    except Exception:
        log.exception("webhook delivery stopped; `scraper deliver` goes on from each endpoint's cursor")
    finally:
        conn.close()


def _nap(seconds, stop):
    """Sleep up to `seconds`, waking within NAP_S of `stop()` (a sleep resumes after the SIGTERM handler: the
    run's command would wait out a whole idle poll before its last pass)."""
    deadline = time.monotonic() + seconds
    while not stop() and time.monotonic() < deadline:
        time.sleep(min(NAP_S, max(0.0, deadline - time.monotonic())))


def _begin_etl(settings):
    """The ETL API's cursor, made before the run writes its first event (and before the fork: nothing open
    crosses it)."""
    from scraper.db import store
    from scraper.mirror import etl
    conn = store.open_db(settings.db_path)
    try:
        etl.begin(conn, settings)
    finally:
        conn.close()


@contextlib.contextmanager
def beside(settings):
    """`with beside(settings):` delivery runs while the block does, when `settings.webhooks` lists endpoints
    or `settings.etl_url` is set."""
    if not settings.webhooks and not settings.etl_url:
        yield
        return
    if settings.etl_url:
        _begin_etl(settings)
    process = multiprocessing.get_context("fork").Process(target=_main, args=(settings, os.getpid()),
                                                           name="webhooks", daemon=True)
    # blocked across the fork: a SIGTERM that comes before the child's handler waits for it, not kills it
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    try:
        yield
    finally:
        process.terminate()
        process.join(STOP_WAIT_S)
        if process.is_alive():
            log.warning("webhook delivery did not finish its last pass in %.0f s; `scraper deliver` goes on",
                        STOP_WAIT_S)
            process.kill()
            process.join()
