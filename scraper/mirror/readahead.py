"""A walk's next pages, fetched while the walk reads the one it has (issue 45: the rate sets the pace).

A walk of the n8n listing asks its pages one after the other, and each costs the answer's wait and its
parse: at 20/s with 40 ms answers, a 100-template page took 80 ms, so a walk of 31 pages reached 12 a
second and `seed` cost an end-to-end run (seed, then run) 1.4 s of its rate. With the next pages under way
meanwhile, the rate sets the walk's pace again.

Each page ahead is fetched by a reader: a thread with a polite client of its own (its own connection: a
sqlite3 connection stays in the thread that opened it), opened when first needed. Its requests take the
domain's slot, robots.txt, the shared 429 pause, the breaker and the request log as the walk's own do,
through the database, as the workers of a run share them. `DEPTH` pages at most are ahead; a page fetched
ahead is handed over as its body or the error its fetch raised, and the walk counts that error as its
first try of the page (its backoff and retries follow).
"""

import concurrent.futures
import contextlib
import logging

from scraper.db import store
from scraper.politeness import client

log = logging.getLogger(__name__)

DEPTH = 3   # pages ahead: with the walk's own, enough answers in flight for 20/s at 80 ms each (4: no faster)


class _Reader:
    """One thread and its polite client, opened on its first page and kept until `close()`."""

    def __init__(self, settings, source, domain, sleep):
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="read-ahead")
        self._stack = contextlib.ExitStack()
        self._get = None
        self.opened = self._pool.submit(self._open, settings, source, domain, sleep)

    def _open(self, settings, source, domain, sleep):
        conn = store.open_db(settings.db_path)
        self._stack.callback(conn.close)
        polite = self._stack.enter_context(client.opened(settings, conn, "seed"))
        self._get = polite.walk(source, domain, sleep=sleep)

    def fetch(self, url):
        return self._pool.submit(lambda: self._get(url))

    def close(self):
        try:
            self._pool.submit(self._stack.close).result()
        finally:
            self._pool.shutdown(wait=True)


class ReadAhead:
    """`want(urls)`: the pages the walk asks next, in order; up to DEPTH of them are fetched meanwhile.
    `take(url)`: None when `url` was not fetched ahead, else a callable that waits for its fetch and returns
    the body (or raises the fetch's error). `close()` waits for the fetches under way and closes the readers."""

    def __init__(self, settings, source, domain, sleep):
        self._args = (settings, source, domain, sleep)
        self._readers: list[_Reader] = []
        self._ahead: dict[str, tuple[_Reader, concurrent.futures.Future]] = {}
        self._broken = False

    def want(self, urls):
        for url in urls:
            if url in self._ahead:
                continue
            reader = self._idle()
            if reader is None:
                return
            self._ahead[url] = (reader, reader.fetch(url))

    def _idle(self):
        """A reader with no page in hand (a new one while fewer than DEPTH), or None."""
        busy = {id(reader) for reader, _ in self._ahead.values()}
        idle = next((r for r in self._readers if id(r) not in busy), None)
        if idle is not None or self._broken or len(self._readers) >= DEPTH:
            return idle
        reader = _Reader(*self._args)
        self._readers.append(reader)
        error = reader.opened.exception()
        if error is not None:       # no client of its own (the database refused one): one page at a time
            log.debug("the walk reads no page ahead: %s", error)
            self._broken = True
            return None
        return reader

    def take(self, url):
        held = self._ahead.pop(url, None)
        return None if held is None else held[1].result

    def close(self):
        for _, future in self._ahead.values():
            future.cancel()
            with contextlib.suppress(Exception):     # its error is nobody's now: the walk ended without it
                future.result()
        self._ahead.clear()
        for reader in self._readers:
            reader.close()
        self._readers.clear()
