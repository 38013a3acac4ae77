"""The run record, reported to the ETL API (`etl_url`) as the system scraper grew from does: each run's work on
a source is an ETL run of that domain (the source's name), created with its items, its items marked done,
failed or invalid in batches, then finalized with its counts.

It is fed from the outbox like a webhook endpoint (mirror/delivery: its own cursor in `webhook_endpoints`,
the lease, the pinned batch, the retry schedule, each attempt in `deliveries`), so it survives a kill -9
anywhere and never slows the crawl. What one batch of events means:
- `run.started`: the latest ETL run of the domain is read; an unfinished one (a killed run's) is continued,
  else a run is created with the source's items, under an idempotency key (the event's id): a create
  retried after a timeout makes one run;
- `job.failed`, `job.invalid`: item updates with the reason, sent in batches of ITEMS_PER_REQUEST;
- `run.progress`: the items ended done since the last report (the outbox holds no event per done job;
  `run_jobs` does);
- `run.finished`: the done items again from RECONCILE_S before the last report (on PostgreSQL a job's
  commit may land after a later one was read), then the finalize, with each job's last outcome.
Every call is idempotent, so a retried batch repeats no effect. A new ETL cursor starts at the outbox's
head: the ETL API gets the runs from the first one made with `etl_url` set, not the history.
"""

import logging
import time

from scraper.base.webhooks import Endpoint
from scraper.db import deliveries
from scraper.db import etl as etl_db
from scraper.net import etl as etl_net
from scraper.net import webhook

log = logging.getLogger(__name__)

TYPES = ("run.started", "run.progress", "run.finished", "job.failed", "job.invalid")
BATCH = 100                 # events per attempt
ITEMS_PER_REQUEST = 100     # item updates per request
ATTEMPT_S = 120.0           # one attempt's calls (each bounded by the client's timeout): how long it holds the lease
RECONCILE_S = 600.0         # run.finished sends again the done items of this long before the last report


def endpoint(settings):
    """The ETL API as the delivery sees an endpoint (its row, lease, schedule), or None without `etl_url`."""
    if not settings.etl_url:
        return None
    return Endpoint(settings.etl_url, (), TYPES, (), BATCH, timeout_s=ATTEMPT_S)


def begin(conn, settings):
    """Make the ETL API's cursor at the outbox's head the first time (before a run writes its events)."""
    if settings.etl_url:
        deliveries.begin(conn, endpoint(settings).shown)


class Reporter:
    """Sends one batch of outbox events to the ETL API (`send`, as mirror/delivery calls it)."""

    def __init__(self, conn, client):
        self.conn, self.client = conn, client

    @classmethod
    def of(cls, conn, settings):
        """The reporter of `settings.etl_url`, or None without one."""
        if not settings.etl_url:
            return None
        return cls(conn, etl_net.Client(settings.etl_url, settings.etl_key, user_agent=settings.user_agent))

    def send(self, endpoint, batch, now):
        """Apply `batch`; the attempt's outcome as mirror/delivery records it. A bad answer fails the attempt
        with its reason (status None when the answer was a 2xx that is no run), never the caller."""
        started = time.monotonic()
        status = error = retry_after = None
        try:
            self._apply(batch)
            status = 200
        except etl_net.EtlError as e:
            error, retry_after = str(e), e.retry_after
            status = e.status if e.status is not None and not 200 <= e.status < 300 else None
        return {"url": endpoint.shown, "webhook_id": webhook.webhook_id(batch), "events": len(batch),
                "status": status, "error": error, "ok": error is None, "retry_after": retry_after,
                "ms": int((time.monotonic() - started) * 1000)}

    def _apply(self, batch):
        updates = {}                # (etl id, source) -> item updates not sent yet, in outbox order
        for e in batch:
            run_id, source, data = e["run_id"], e["source"], e["data"]
            if run_id is None:
                continue
            if e["type"] == "run.started":
                self._ensure(run_id, source, e)
                continue
            etl_id = etl_db.mapped(self.conn, run_id, source)
            if etl_id is None:      # a run that began before etl_url was set
                continue
            if e["type"].startswith("job."):
                updates.setdefault((etl_id, source), []).append(
                    {"id": data.get("key", e["subject"]), "url": data.get("url"), "status": e["type"][4:],
                     "failedReason": f"{data.get('kind')}: {data.get('reason')}"})
                continue
            self._flush(updates)
            finished = e["type"] == "run.finished"
            self._done(etl_id, source, RECONCILE_S if finished else 0.0)
            if finished:
                counts = etl_db.counts(self.conn, etl_id, source)
                self.client.finalize(etl_id, {
                    "started_at": data.get("started_at"), "finished_at": data.get("finished_at"),
                    "status": data.get("status"), "total_count": counts["total"],
                    "finished_count": counts["finished"], "failed_count": counts["failed"],
                    "invalid_count": counts["invalid"]})
        self._flush(updates)

    def _ensure(self, run_id, source, event):
        if etl_db.mapped(self.conn, run_id, source) is not None:
            return
        latest = self.client.latest(source)
        if latest is not None and not latest.finished:
            log.info("ETL API: run %s of %s continues the unfinished run %s", run_id, source, latest.id)
            etl_id = latest.id
        else:
            etl_id = self.client.create(source, etl_db.items(self.conn, run_id, source),
                                        event["data"].get("started_at", event["occurred_at"]), event["id"]).id
        etl_db.remember(self.conn, run_id, source, etl_id)

    def _flush(self, updates):
        for (etl_id, _source), items in list(updates.items()):
            self._post(etl_id, items)
        updates.clear()

    def _done(self, etl_id, source, back_s):
        since = etl_db.done_at(self.conn, etl_id, source)
        items, newest = etl_db.done_since(self.conn, etl_id, source, max(0.0, since - back_s) if since else 0.0)
        self._post(etl_id, items)
        etl_db.advance(self.conn, etl_id, source, newest)

    def _post(self, etl_id, items):
        for i in range(0, len(items), ITEMS_PER_REQUEST):
            self.client.update_items(etl_id, items[i:i + ITEMS_PER_REQUEST])
