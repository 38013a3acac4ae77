"""A run's failure told from the outbox (`--notify-url` and the pings, net/notify): the `run.finished` events
are read by a cursor of their own, so a failure whose command was killed between its commit and its calls is
still told, once, by the next command that starts with a ping or notify URL.

The cursor is a row of `webhook_endpoints` per machine (ROW + the host; no URL: a ping URL's path is its
secret), made at the outbox's head the first time; a machine tells the runs it ran (several share a
PostgreSQL database: each tells its own, so none is told twice). At the start (`overdue`) every failing run
after it is told (the fail ping with its next step, the message with its counts), then the cursor moves
over what was read; at the end (`settled`) the command's own run was told live, any other's is told the
same way, and the cursor moves again. The lease keeps two commands from telling one failure twice; a kill
between a call and the cursor's move may repeat it (at least once).
"""

import logging
import os
import time

from scraper.base.urls import is_db_url
from scraper.db import deliveries, events, runrecord, runstate, schema, store
from scraper.net import notify
from scraper.policy import outcome

log = logging.getLogger(__name__)

ROW = "scraper:health:"     # + the host: a machine's announcements' place in the outbox
HOLD_S = 60.0               # a few calls, each bounded by net/notify (2 tries of 5 s)


class Outbox:
    """The outbox of the database at `db_path`, as net.notify.Health reads it; `pid`, `host`: this process
    (its own run is told live, not from here)."""

    def __init__(self, db_path, pid=None, host=None, clock=time.time):
        self.db_path, self.clock = db_path, clock
        self.pid, self.host = os.getpid() if pid is None else pid, runstate.host() if host is None else host

    def overdue(self, health):
        """Tell the failures no command told (before this command's start ping)."""
        self._tell(health, own=False)

    def settled(self, health):
        """Move over this command's own run (told live), telling any other failure first."""
        self._tell(health, own=True)

    def _tell(self, health, own):
        if not is_db_url(self.db_path) and not os.path.exists(self.db_path):
            return
        try:
            conn = store.connect(self.db_path)
        except Exception:       # telling must never change how the command ends
            log.exception("could not read the outbox for the failures to tell")
            return
        try:
            if not schema.has_table(conn, "webhook_endpoints"):
                return
            row = ROW + (self.host or "")
            deliveries.begin(conn, row)
            now = self.clock()
            held = now + HOLD_S
            st = deliveries.take(conn, row, now, held)
            if st is None:
                return
            failures, seen = _failures(conn, st["cursor"])
            upto = st["cursor"]
            try:
                for run_id, code, counts, last in failures:
                    pid, host = runrecord.started_by(conn, run_id)
                    if host == self.host and not (own and pid == self.pid):
                        log.info("telling the failure of run %d (exit %d), which was not told", run_id, code)
                        health.tell(code, outcome.next_step(code, counts["failed"]), counts, what="run")
                    upto = last
                upto = seen
            finally:
                deliveries.skip(conn, row, upto, self.clock(), held)
        except Exception:
            log.exception("could not tell the failures the outbox holds")
        finally:
            conn.close()


def _failures(conn, cursor):
    """([(run id, exit code, counts, last seq)] of each run whose `run.finished` is after `cursor` and whose
    exit code is not harmless, in order, its counts summed over its sources; the last seq read)."""
    runs, seen = {}, cursor
    for row in events.after(conn, cursor, types=("run.finished",)):
        seen = row["seq"]
        e = events.as_dict(row)
        run = runs.setdefault(e["run_id"], {"code": e["data"].get("exit_code"), "last": e["seq"],
                                            "counts": {"finished": 0, "failed": 0, "invalid": 0}})
        run["last"] = e["seq"]
        for k in run["counts"]:
            run["counts"][k] += int(e["data"].get(k) or 0)
    return [(run_id, r["code"], r["counts"], r["last"]) for run_id, r in runs.items()
            if isinstance(r["code"], int) and r["code"] not in notify.HARMLESS], seen
