"""Cheap refreshes (issue 43), measured: requests and bytes received, with `revalidate` off (as before) and on.

    .venv/bin/python -m scripts.bench_refresh [--templates 300 --edited 10] [--events 60] [--json PATH]

- n8n: a refresh of every stored template, `--edited` of them edited and every view count moved, against the
  stand-in whose detail validators ignore the views (`--validators views`): 304s, new versions, bytes.
- n8n's listing walk the next day, every view count moved (so every page's tag too), as the real API behaves.
- catalogue: the daily walk of the events stand-in (robots.txt, the sitemaps, the pages it queues, and the run
  that fetches them) on an unchanged day, once the sitemap dates have earned their trust.

Both stand-ins run in this process on 127.0.0.1 / 127.0.0.2 (threads); one in-process worker, no rate limit,
real SQLite files in a temporary folder. Bytes are the bodies the stand-in sent (headers left out).
"""

import argparse
import dataclasses
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from scraper.base import settings
from scraper.base.sources import Source
from scraper.db import store
from scraper.db.queue import Queue
from scraper.mirror import catalogue as walker
from scraper.mirror import seed, sync
from scraper.net import http
from scraper.politeness import client, limiter
from scraper.pool import worker
from scripts.standin.catalogue import CatalogueSite
from scripts.standin.server import StandinSite


def _worker(s, conn):
    return worker.Worker(s, "w1", Queue(conn), limiter.NoLimiter(), http.make_session(s.user_agent),
                         rng=random.Random(1))


def _drain(w):
    while w.step():
        pass


def n8n_refresh(folder, templates, edited, revalidate):
    """(requests, bytes, 304s, templates at version 2) of the refresh after the edit."""
    with StandinSite(templates=templates, rate=0, validators="views") as site:
        s = settings.build(db_path=str(folder / f"n8n-{revalidate}.db"), api_url=site.url + "/api",
                           site_url=site.url, transcripts=False, no_limit=True, revalidate=revalidate,
                           revalidate_sample=0)
        conn = store.open_db(s.db_path)
        ids = site.corpus.ids[:templates]
        Queue(conn).seed(list(seed.job_rows(s, ids)), time.time())
        w = _worker(s, conn)
        _drain(w)
        site.change_library(edit=ids[:edited], views=1)
        site.reset()
        sync.refresh(conn, 0, None, time.time())
        _drain(w)
        stats = site.stats()
        v2 = conn.execute("SELECT COUNT(DISTINCT template_id) FROM answers WHERE version = 2").fetchone()[0]
        w.client.session.close()
        conn.close()
    return {"requests": stats["requests"], "bytes": stats["bytes_sent"],
            "not_modified": stats["by_status"].get("304", 0), "version_2": v2}


def n8n_walk(folder, templates, revalidate):
    """(requests, bytes) of the n8n listing walk on the next day, every view count moved (its tags with them)."""
    with StandinSite(templates=templates, rate=0, validators="strong") as site:
        s = settings.build(db_path=str(folder / f"walk-{revalidate}.db"), api_url=site.url + "/api",
                           site_url=site.url, no_limit=True, revalidate=revalidate)
        seed.discover(s)
        site.change_library(views=1)
        site.reset()
        seed.discover(s)
        stats = site.stats()
    return {"requests": stats["requests"], "bytes": stats["bytes_sent"],
            "not_modified": stats["by_status"].get("304", 0)}


def catalogue_day(folder, events, revalidate):
    """(requests, bytes) of an unchanged day's walk and run, after the walks that earn the dates' trust."""
    with CatalogueSite(events=events, seed=3) as site:
        options = {"site": site.url, "include": ["^/events/"], "type": "Event", "required": ["name", "startDate"]}
        source = Source(name="events", kind="catalogue", options=tuple(sorted(options.items())))
        s = dataclasses.replace(settings.build(db_path=str(folder / f"events-{revalidate}.db"), transcripts=False,
                                               no_limit=True, revalidate=revalidate, revalidate_sample=0),
                                sources=(source,))
        conn = store.open_db(s.db_path)
        w = _worker(s, conn)

        def day():
            with client.opened(s, conn, "walk") as polite:
                walker.walk(conn, s, source, polite.walk(source=source.name), time.time())
            _drain(w)

        for _ in range(3):      # the first walk, the one whose checks prove the dates, the one that settles them
            day()
        conn.execute("UPDATE robots SET fetched_at = fetched_at - 90000")    # a day later: robots.txt again
        site.reset()
        day()
        stats = site.stats()
        w.client.session.close()
        conn.close()
    return {"requests": stats["requests"], "bytes": stats["bytes_sent"], "by_kind": stats["by_kind"]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--templates", type=int, default=300)
    parser.add_argument("--edited", type=int, default=10)
    parser.add_argument("--events", type=int, default=60)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args(argv)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for on in (False, True):
            out[f"n8n_refresh_revalidate_{'on' if on else 'off'}"] = n8n_refresh(folder, args.templates,
                                                                                 args.edited, on)
            out[f"catalogue_day_revalidate_{'on' if on else 'off'}"] = catalogue_day(folder, args.events, on)
            out[f"n8n_walk_revalidate_{'on' if on else 'off'}"] = n8n_walk(folder, args.templates, on)
    before, after = out["n8n_refresh_revalidate_off"], out["n8n_refresh_revalidate_on"]
    print(f"n8n refresh of {args.templates} templates, {args.edited} edited, views moved: "
          f"before {before['requests']} requests, {before['bytes']:,} bytes; after {after['requests']} requests "
          f"({after['not_modified']} answered 304), {after['bytes']:,} bytes; {after['version_2']} at version 2")
    before, after = out["catalogue_day_revalidate_off"], out["catalogue_day_revalidate_on"]
    print(f"catalogue daily walk and run, {args.events} events, an unchanged day: before {before['requests']} "
          f"requests, {before['bytes']:,} bytes ({before['by_kind']}); after {after['requests']} requests, "
          f"{after['bytes']:,} bytes ({after['by_kind']})")
    before, after = out["n8n_walk_revalidate_off"], out["n8n_walk_revalidate_on"]
    print(f"n8n listing walk of {args.templates} templates, view counts moved: before {before['requests']} "
          f"requests, {before['bytes']:,} bytes; after {after['requests']} requests ({after['not_modified']} "
          f"answered 304), {after['bytes']:,} bytes")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    ok = out["n8n_refresh_revalidate_on"]["not_modified"] == args.templates - args.edited
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
