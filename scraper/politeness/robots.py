"""robots.txt per host (scheme, host and port), obeyed before the first request to it.

Fetched through the domain's politeness (its rate slot, breaker and request log: the caller's `get`),
bounded (ROBOTS_MAX_BYTES, redirects as `http.fetch` follows them), parsed with Protego (Scrapy's
parser), stored in the `robots` table. A 2xx or 4xx outcome is reused for 24 hours by every process and
command; a 5xx, 429 or no answer is retried with the run's policy, then RobotsUnavailable: the host is
fully disallowed while it lasts (the worker opens its breaker; each probe fetches robots.txt again) and
nothing is stored as reusable. The pure rules are in `scraper.policy.robots`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeGuard
from urllib.parse import urlsplit

from protego import Protego

from scraper.base.clock import SYSTEM
from scraper.base.errors import FetchError, RobotsDisallowed, RobotsUnavailable
from scraper.base.urls import domain_of
from scraper.db import domains
from scraper.db import politeness as rows
from scraper.policy import retry
from scraper.policy import robots as rules

if TYPE_CHECKING:
    from scraper.base.clock import Clock
    from scraper.base.settings import Settings
    from scraper.db.backend import Conn

Get = Callable[[str, int], bytes]     # one polite GET of the domain: (url, max_bytes) -> the 2xx body
Sleep = Callable[[float], object]
Parsed = tuple[float, Any]            # (expires_at, Protego or None when everything is allowed)

log = logging.getLogger(__name__)

ROBOTS_MAX_BYTES = 512 * 1024   # RFC 9309 asks parsers to read at least 500 KiB
RETRY_MAX_S = 60.0              # a robots.txt retry waits at most this (a Retry-After of hours is not waited out)
OBEY = "obey"
IGNORE = "ignore"


def host_of(url: str) -> str:
    """scheme://host:port of a URL (the port always written: http://a and http://a:80 are one host)."""
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme, 0)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}"


def robots_url(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/robots.txt"


def sitemaps(conn: Conn, host_or_url: str) -> list[str]:
    """The Sitemap: URLs of a host's stored robots.txt (any age; [] when none is stored). For the sources
    work: call it with a URL or a `host_of` value and an open database connection."""
    row = rows.load_robots(conn, host_of(host_or_url))
    return list(row["sitemaps"]) if row else []


def ignored(settings: Settings, domain: str | None) -> bool:
    """Whether this domain's rules are ignored knowingly (--robots ignore, --robots-ignore DOMAIN)."""
    return settings.robots == IGNORE or domain in settings.robots_ignore


class Robots:
    """The robots.txt of every host one process sends to. `check(url, domain, get)` before a request:
    returns when the URL may be fetched, raises RobotsDisallowed or RobotsUnavailable.

    `get(url, max_bytes)` is one polite GET of the domain (the body of a 2xx, FetchError otherwise)."""

    def __init__(self, settings: Settings, conn: Conn, clock: Clock = SYSTEM, sleep: Sleep | None = None,
                 on_rate: Callable[[str], object] = lambda domain: None) -> None:
        self.s = settings
        self.conn = conn
        self.clock = clock
        self.sleep = sleep or clock.sleep
        self.on_rate = on_rate      # told when robots.txt changed a domain's rate (the limiter re-reads it)
        self.token = rules.product_token(settings.user_agent)
        self._hosts: dict[str, Parsed] = {}     # host -> (expires_at, Protego or None: everything allowed)

    def check(self, url: str, domain: str, get: Get, sleep: Sleep | None = None, tries: int | None = None) -> None:
        """`sleep(seconds)` waits between tries of a robots.txt that did not answer (default: the one given
        at construction); a worker's nap renews its lease and gives the job back on a stop. `tries`: how
        many (default --max-attempts; a breaker's probe sends one request, so it tries once)."""
        if ignored(self.s, domain) or ignored(self.s, domain_of(url)) or ignored(self.s, urlsplit(url).hostname):
            return
        host = host_of(url)
        cached = self._hosts.get(host)
        if cached is None or cached[0] <= self.clock():
            cached = self._hosts[host] = self._load(host, url, domain, get, sleep or self.sleep, tries)
        parser = cached[1]
        if parser is not None and not parser.can_fetch(url, self.token):
            raise RobotsDisallowed(f"robots.txt of {host.split('://', 1)[1]} disallows {urlsplit(url).path} "
                                   f"for user-agent {self.token!r}")

    def sitemaps_of(self, url: str, domain: str, get: Get) -> list[str]:
        """The Sitemap: URLs of the robots.txt of `url`'s host, read (once, kept as `check` keeps it) through
        `get`; RobotsUnavailable as `check` raises it, unless the domain's rules are ignored ([] then)."""
        host = host_of(url)
        cached = self._hosts.get(host)
        if cached is None or cached[0] <= self.clock():
            try:
                cached = self._hosts[host] = self._load(host, url, domain, get, self.sleep)
            except RobotsUnavailable:
                if ignored(self.s, domain):
                    return []
                raise
        return sitemaps(self.conn, url)

    def _load(self, host: str, url: str, domain: str, get: Get, sleep: Sleep, tries: int | None = None) -> Parsed:
        row = rows.load_robots(self.conn, host)
        if not _fresh(row, self.clock()):
            with rows.robots_lock(self.conn, self.s.db_path, host):
                row = rows.load_robots(self.conn, host)     # another process may have fetched it meanwhile
                if not _fresh(row, self.clock()):
                    row = self._fetch(host, url, get, sleep, tries or self.s.max_attempts)
        parser = Protego.parse(_text(row["body"])) if rules.outcome_of(row["status"]) == rules.RULES else None
        self._apply_rate(domain, row)
        return row["fetched_at"] + rules.REUSE_S, parser

    def _fetch(self, host: str, url: str, get: Get, sleep: Sleep, tries: int) -> dict[str, Any]:
        """Fetch, tried up to `tries` times with the run's policy; the stored row, or RobotsUnavailable."""
        target = robots_url(url)
        attempts = 0
        while True:
            attempts += 1
            status, body = None, b""
            try:
                body, status = get(target, ROBOTS_MAX_BYTES), 200
            except FetchError as e:
                # an answer over the cap is no usable answer (RFC 9309 asks for 500 KiB; we read 512)
                status = None if e.kind == retry.TOO_LARGE else e.status
                if rules.outcome_of(status) == rules.UNAVAILABLE:
                    outcome = retry.decide(e.kind, status, attempts, self.s.max_attempts, e.retry_after,
                                           self.s.backoff_base_s)
                    if attempts < tries and outcome.action == retry.RETRY:
                        log.warning("%s: %s; trying again in %.1f s", target, e.brief(), outcome.delay_s)
                        sleep(min(outcome.delay_s, RETRY_MAX_S))
                        continue
                    raise RobotsUnavailable(host, status or e.kind) from e
            parser = Protego.parse(_text(body)) if status == 200 else None
            crawl_delay = parser.crawl_delay(self.token) if parser else None
            rr = parser.request_rate(self.token) if parser else None
            row: dict[str, Any] = {
                "host": host, "fetched_at": self.clock(), "status": status, "body": body, "crawl_delay": crawl_delay,
                "request_rate": f"{rr.requests}/{rr.seconds}" if rr else None,
                "sitemaps": list(parser.sitemaps) if parser else []}
            rows.save_robots(self.conn, **row)
            log.info("robots.txt of %s: HTTP %s%s%s", host, status,
                     f", crawl-delay {crawl_delay:g} s" if crawl_delay else "",
                     f", request-rate {row['request_rate']}" if rr else "")
            return row

    def _apply_rate(self, domain: str, row: Any) -> None:
        """Crawl-delay and Request-rate lower the domain's rate for this run (never raise it)."""
        rr = _request_rate(row["request_rate"])
        cap = rules.robots_rate(row["crawl_delay"], rr)
        if cap is None:
            return
        delay = bool(row["crawl_delay"])

        def lower(r: Any) -> dict[str, Any]:
            old = r["robots_rate_per_s"]
            if old is not None and old <= cap and (r["robots_crawl_delay"] or not delay):
                return {}
            return {"robots_rate_per_s": cap if old is None else min(old, cap),
                    "robots_crawl_delay": int(delay or bool(r["robots_crawl_delay"]))}

        before, after = domains.update_rate(self.conn, domain, self.clock(), lower)
        if before != after:
            from scraper.politeness.rates import store_effective
            rate = store_effective(self.conn, self.s, domain, self.clock())
            log.info("%s: robots.txt asks for at most %.3g requests/s; rate now %.3g/s, burst %d", domain, cap,
                     rate.rate_per_s, rate.burst)
        self.on_rate(domain)


def _fresh(row: dict[str, Any] | None, now: float) -> TypeGuard[dict[str, Any]]:
    """A stored 2xx/4xx robots.txt younger than 24 hours (5xx and no answer are never reused)."""
    return (row is not None and rules.outcome_of(row["status"]) != rules.UNAVAILABLE
            and now - row["fetched_at"] < rules.REUSE_S)


def _text(body: bytes | None) -> str:
    return (body or b"").decode("utf-8", "replace")


def _request_rate(text: str | None) -> tuple[int, int] | None:
    try:
        requests, seconds = (text or "").split("/")
        return int(requests), int(seconds)
    except ValueError:
        return None
