"""A run's health, told to the operator's own services: the cron-monitoring ping (healthchecks.io, Uptime
Kuma: `URL/start`, then `URL` or `URL/fail`) and a chat message on failure (Slack and Mattermost accept
`{"text": ...}`).

These calls go to the operator's service, not to a site we mirror: no robots.txt, no rate limit. Each is
bounded (TIMEOUT_S per try, TRIES tries), and a failure is logged and recorded, never raised: telling
about a run never changes how the run ends. `run` calls `started` and `finished`; so can any other command
that runs unattended (`scraper update`). With an `outbox` (mirror/announce), a run's failure that a crash
kept from being told (its `run.finished` committed, the call never made) is told at the next start, once.
"""

import logging
import time
from urllib.parse import urlsplit

import requests

from scraper.base import exitcodes

log = logging.getLogger(__name__)

TIMEOUT_S = 5.0     # per try, for the connection and for the answer's headers (the body is never read)
TRIES = 2
RETRY_PAUSE_S = 0.5
BODY_MAX_CHARS = 10_000     # healthchecks.io keeps the first 100 kB of a ping's body; a last line is short
HARMLESS = (exitcodes.OK, exitcodes.LOCKED)   # 75: another run held the database; the next cron run retries

# what the exit code means, for the message (the last line says what to do next)
_HAPPENED = {
    exitcodes.FAILED: "some jobs failed",
    exitcodes.USAGE: "the command line or configuration was refused",
    exitcodes.GAVE_UP: "a domain kept failing, so its jobs were left pending",
    exitcodes.CRASHING: "workers kept crashing at start",
    exitcodes.DB_DOWN: "the database stayed unreachable",
    exitcodes.DISK_FULL: "the disk under the database filled up",
    exitcodes.SIGINT: "stopped by Ctrl-C",
    exitcodes.SIGTERM: "stopped by SIGTERM",
}


def send(method, url, *, body=None, json_body=None, timeout_s=TIMEOUT_S, tries=TRIES, user_agent=None,
         sleep=time.sleep):
    """One bounded call; True when the service answered 2xx. Never raises."""
    headers = {"User-Agent": user_agent} if user_agent else {}
    for attempt in range(1, tries + 1):
        try:
            resp = requests.request(method, url, data=body, json=json_body, headers=headers,
                                    timeout=(timeout_s, timeout_s), stream=True, allow_redirects=True)
            resp.close()    # the answer's body means nothing to us
            if 200 <= resp.status_code < 300:
                return True
            why = f"HTTP {resp.status_code}"
        except (requests.RequestException, ValueError) as e:    # ValueError: a malformed URL
            # requests names the URL's path in its messages: the path is the secret, leave it out
            path = urlsplit(url).path
            why = f"{type(e).__name__}: {str(e).replace(path, '/…') if path not in ('', '/') else e}"
        log.warning("could not reach %s (try %d of %d): %s", _safe(url), attempt, tries, why)
        if attempt < tries:
            sleep(RETRY_PAUSE_S)
    return False


def message(code, what, last_line, counts=None):
    """The chat message of a run that did not end well (pure): exit code, what happened, what to do, counts."""
    happened = _HAPPENED.get(code, f"it ended with exit code {code}")
    lines = [f"scraper {what} exited {code}: {happened}."]
    if last_line:
        lines.append(last_line)
    if counts:
        lines.append("jobs: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
    return "\n".join(lines)


class Health:
    """The ping and notify URLs of one unattended command; `record(at, kind, ok)` keeps each outcome
    (for `status --json`'s `last_notification`). Does nothing where a URL is not set."""

    def __init__(self, ping_url=None, notify_url=None, record=None, what="run", user_agent=None, clock=time.time,
                 sender=send, outbox=None):
        self.ping_url = (ping_url or "").rstrip("/") or None
        self.notify_url = notify_url or None
        self.record, self.what, self.ua, self.clock, self.send = record, what, user_agent, clock, sender
        # mirror/announce: the failures in the outbox that a crash left untold (told before the start ping)
        # and the end of this command's own (told here)
        self.outbox = outbox if (self.ping_url or self.notify_url) else None

    def started(self):
        if self.outbox is not None:
            self.outbox.overdue(self)
        if self.ping_url:
            self._call("start", "POST", self.ping_url + "/start")

    def finished(self, code, last_line="", counts=None):
        """Tell how the command ended: the success or fail ping, and a message unless it ended well."""
        self.tell(code, last_line, counts)
        if self.outbox is not None:
            self.outbox.settled(self)

    def tell(self, code, last_line="", counts=None, what=None):
        """The success or fail ping of an exit code, and the message unless it is harmless."""
        harmless = code in HARMLESS
        if self.ping_url:
            self._call("success" if harmless else "fail", "POST",
                       self.ping_url if harmless else self.ping_url + "/fail",
                       body=(last_line or "")[:BODY_MAX_CHARS].encode("utf-8"))
        if self.notify_url and not harmless:
            self._call("notify", "POST", self.notify_url,
                       json_body={"text": message(code, what or self.what, last_line, counts)})

    def _call(self, kind, method, url, **kwargs):
        ok = self.send(method, url, user_agent=self.ua, **kwargs)
        if not ok:
            log.error("the %s call to %s failed; the run's exit code is unchanged", kind, _safe(url))
        if self.record is not None:
            try:
                self.record(self.clock(), kind, ok)
            except Exception:   # keeping the outcome must not change how the command ends either
                log.exception("could not record the %s call", kind)
        return ok


def _safe(url):
    """The URL without its path (a ping URL's path is its secret: anyone who has it can ping)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/…" if parts.netloc else "(a malformed URL)"


