"""Defaults (with their units), validation, and the frozen Settings passed to every part."""

import dataclasses
import functools
import os
import re
from urllib.parse import urlsplit

from scraper import __version__
from scraper.base import config, endpoints, proxies, webhooks
from scraper.base.config import setting, specs_of
from scraper.base.errors import ConfigError
from scraper.base.sources import BUILTIN as BUILTIN_SOURCES
from scraper.base.sources import Source, of_config
from scraper.base.urls import domain_of, is_db_url, redact_db_url

# Defaults: one place, units in the names.
DB_PATH = "jobs.db"
API_URL = "https://api.n8n.io/api"
SITE_URL = "https://n8n.io"
# names the tool and its version; operators add a contact address with --user-agent (see the guide)
USER_AGENT = f"scraper/{__version__} (n8n.io template library collector)"
WORKERS = 4
RATE_PER_S = 2.0            # n8n.io's published guidance
BURST = 5
MAX_ATTEMPTS = 3
MEMORY_LIMIT_MB = 1024      # the whole pool: supervisor + workers
# The ceiling counts PSS (scraper.pool.memory): a forked worker shares most pages with the supervisor.
PROCESS_MB = 20             # measured: one process (Python, requests, sqlite) is 10-16 MB of PSS (35-40 MB resident)
MIN_SHARE_MB = 12           # below this a worker would be recycled after every job, or never start
TIMEOUT_S = 30.0            # the whole answer of one request: connect, headers and body
MAX_ANSWER_MB = 50          # decoded; a template answer is 5-60 KB (Scrapy's DOWNLOAD_MAXSIZE is 1 GB, warns at 32 MB)
MAX_OPEN_CYCLES = 3         # failed probes in a row after which a run stops trying a domain
LEASE_S = 90.0              # must outlast one rate-limit wait + one request; extended before each fetch
BACKOFF_BASE_S = 0.5        # 0.5 s, 1 s, 2 s ... up to retry.BACKOFF_MAX_S: one URL's retries (the domain's
                            # rate, pause and breaker guard the site); 1 s left the last faults as a 3 s tail
PAUSE_429_S = 1.0           # domain pause after a 429 without Retry-After; doubles while 429s continue
PAUSE_MAX_S = 300.0
BREAKER_FAILURES = 10       # consecutive failed requests that open a domain's breaker
BREAKER_OPEN_S = 60.0
MAX_JOBS_PER_WORKER = 500   # recycle a worker after this many jobs (bounds slow leaks)
# SQLite: a run stops taking jobs when the disk under the database has less free (exit 74): enough for the WAL
# of a reader's long read transaction and the last results (Heritrix pauses a crawl under 500 MB)
MIN_FREE_MB = 200
LOCK_REPORT_AFTER_S = 30.0  # SQLite: a writer kept from the database this long says who holds it, and waits on
STOP_GRACE_S = 5.0          # after Ctrl-C/SIGTERM, time a worker gets to finish before it is killed
PROGRESS_EVERY_S = 10.0     # log line interval when stderr is not a terminal
YOUTUBE_URL = "https://www.youtube.com"
YOUTUBE_DOMAIN = "youtube.com"
# YouTube publishes no safe rate and blocks an address after a few hundred quick videos: one request
# every 5 s, two at once, is slow enough to look like a person (a transcript takes three requests).
YOUTUBE_RATE_PER_S = 0.2
YOUTUBE_BURST = 2
TRANSCRIPT_LANGUAGES = ("en",)
# Off: YouTube's robots.txt disallows the endpoints the transcript library sends to, so with robots.txt
# obeyed (the default) transcript jobs could only end invalid; an operator turns them on knowingly.
TRANSCRIPTS = False
BROWSER = "chromium"        # `fetcher = "browser" | "auto"`: the system's Chromium, found on PATH (never downloaded)
REVALIDATE_SAMPLE = 50      # one 304 in this many is re-fetched in full to check it (a 2 % sample)
BROWSER_ENDPOINT = "local"  # where pages are rendered: the system's Chromium here (base/endpoints)
BROWSER_SESSIONS = 2        # remote sessions open at once across the pool (Browserbase's free plan allows 3)
BROWSER_SESSION_PAGES = 100  # a session (a local browser too) is retired after this many pages (Crawlee's figure)
# a remote endpoint that refuses every session this long (no session of the pool opened or used meanwhile) is
# down, not full: the jobs that wait for it end `browser_unavailable` (Browserbase ends a session unconnected
# for 5 minutes; a provider that is only full frees a session well within that)
BROWSER_WAIT_S = 300.0
BROWSERBASE_URL = "https://api.browserbase.com"
ADAPTIVE_RECOVER_S = 60.0    # a slowed domain climbs back from its floor to its rate within this long
GIVE_UP_AFTER_S = 600.0     # a domain is given up only after its breaker has been open this long (an outage)
ROBOTS = "obey"             # robots.txt: obey or ignore
REFRESH_DAYS = 30           # `refresh`: re-fetch templates not fetched for this long (edits the listing hides)
PROXY_QUARANTINE_S = 60.0    # a failed proxy's first quarantine (then 120 s, 240 s ... at most 1 h)
DISCOVER_RATE_PER_S = 1.0   # `discover`'s own pace: a guest's, one request a second (robots.txt may lower it)
DISCOVER_TIMEOUT_S = 30.0   # `discover`: one answer, or one rendered page
# PostgreSQL's connection (issue 44): a restart or a silent network is the database's outage, never a site's
DB_DOWN_AFTER_S = 180.0     # a restart takes seconds, a failover a minute or two; past this the run ends (exit 69)
DB_CONNECT_TIMEOUT_S = 10.0
DB_KEEPALIVE_S = 10.0       # TCP keepalives and tcp_user_timeout: a dead peer noticed within about this long
DB_STATEMENT_TIMEOUT_S = 15.0   # a run's statements take milliseconds; a silent round trip is cut after this
RETRY_AFTER_H = 24          # `update`: retry a failed job only a day after it failed (a 403 stays a 403)

SQLITE_HEADER = b"SQLite format 3\x00"


def parse_domain_rate(text):
    """(domain, rate_per_s, burst) from DOMAIN=RATE/BURST (e.g. youtube.com=0.5/3), or such a triple checked;
    ValueError if malformed."""
    text = "{}={!r}/{!r}".format(*text) if isinstance(text, tuple) and len(text) == 3 else text
    match = re.fullmatch(r"\s*([A-Za-z0-9.-]+)\s*=\s*([0-9]*\.?[0-9]+)\s*/\s*([0-9]+)\s*", text or "")
    if not match or float(match.group(2)) <= 0 or int(match.group(3)) < 1:
        raise ValueError(f"{text!r} is not DOMAIN=RATE/BURST with a rate above 0 and a burst of 1 or more "
                         f"(for example youtube.com=0.5/3)")
    return match.group(1).lower(), float(match.group(2)), int(match.group(3))


def _matching(pattern, what, case=str):
    """A list item's check: the item (through `case`) when it matches `pattern`, else ValueError naming `what`."""
    def check(text):
        if not re.fullmatch(pattern, case(text)):
            raise ValueError(f"{text!r} is not {what}")
        return case(text)
    return check


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything a run needs, validated once by `build`, then never changed. A field made by `setting` is a
    setting: its declaration (key, kind, unit, help, constraint) is what the CLI, `scraper config`, the
    validation and the guide's table read."""

    db_path: str = setting(DB_PATH, "db", "path", "The database of jobs and results: a SQLite file's path, or a "
                           "PostgreSQL URL postgresql://USER@HOST:PORT/DB (password from PGPASSWORD or ~/.pgpass).")
    sources_path: str | None = setting(None, "sources", "path", "The sources file ([[source]] tables); without it, "
                                       "those of the config file, else ./sources.toml when that exists, else the "
                                       "built-in n8n source.", optional=True)
    api_url: str = setting(API_URL, "api_url", "url", "Base URL of the n8n template API.")
    site_url: str = setting(SITE_URL, "site_url", "url", "Base URL of the n8n.io site (its host is n8n's domain).")
    user_agent: str = setting(USER_AGENT, "user_agent", "str", "The User-Agent header; add a contact address, e.g. "
                              f"'scraper/{__version__} (+mailto:you@example.org)'.", allowed="one line of "
                              "printable ASCII text", check=lambda v: v.strip() and v.isprintable() and v.isascii())
    youtube_url: str = setting(YOUTUBE_URL, "youtube_url", "url", "Where requests for https://www.youtube.com go, "
                               "same path and query.")
    browser_path: str = setting(BROWSER, "browser_path", "str", "The Chromium of sources with fetcher browser or "
                                "auto: a path, or a name on PATH (`chromium`, the default, is Debian's "
                                "chromium-headless-shell when installed); nothing is ever downloaded.", check=str.strip,
                                env_aliases=("SCRAPER_BROWSER",), allowed="a Chromium executable (a path or a name)")
    browser_endpoint: endpoints.Endpoint = setting(
        endpoints.Endpoint(BROWSER_ENDPOINT), "browser_endpoint", "str", "Where the pages of sources with fetcher "
        "browser or auto are rendered: local (the system's Chromium, launched here), cdp:URL (a Chromium "
        "elsewhere, over the DevTools protocol: http://HOST:PORT or its ws:// URL), playwright:WS-URL (a "
        "Playwright server, over Playwright's protocol) or browserbase (a session of Browserbase's API per "
        "connection, its key in SCRAPER_BROWSERBASE_KEY); every request of a remote page still takes the site's "
        "rate slot here; a source's own browser_endpoint wins.",
        item=endpoints.parse, allowed=endpoints.ALLOWED, metavar="ENDPOINT")
    browser_sessions: int = setting(BROWSER_SESSIONS, "browser_sessions", "int", "Sessions (connections) open "
                                    "at once to a remote browser_endpoint across the pool; a job waits for one "
                                    "(local browsers are bounded by memory_limit instead).", at_least=1)
    browser_wait_s: float = setting(BROWSER_WAIT_S, "browser_wait", "float", "Time a remote browser_endpoint "
                                    "may refuse every session (full, unreachable, answering garbage) while no "
                                    "session of the pool renders a page: then the jobs waiting for it end failed "
                                    "(browser_unavailable; `scraper retry --failed`, as cron's update does, "
                                    "tries them again).", unit="s", above=0)
    browser_session_pages: int = setting(BROWSER_SESSION_PAGES, "browser_session_pages", "int", "Pages a "
                                         "browser session renders before it is retired (closed; the next page "
                                         "opens a fresh one).", at_least=1)
    browser_session_timeout_s: float | None = setting(None, "browser_session_timeout", "float", "Age at which a "
                                                      "browser session is retired after its current page "
                                                      "(default: only by browser_session_pages).", unit="s",
                                                      above=0, optional=True)
    browserbase_url: str = setting(BROWSERBASE_URL, "browserbase_url", "url", "The Browserbase session API's "
                                   "base URL (for browser_endpoint browserbase); a source's own wins.")
    browserbase_project: str | None = setting(None, "browserbase_project", "str", "The Browserbase project "
                                              "sessions are created in (its projectId; default: the key's).",
                                              optional=True, allowed="a project id",
                                              check=lambda v: v.strip() and v.isprintable())
    browserbase_key: webhooks.Secret | None = setting(None, "browserbase_key", "secret", "Browserbase's API key "
                                                      "(shown nowhere: set it in the environment as "
                                                      "SCRAPER_BROWSERBASE_KEY).", optional=True,
                                                      allowed="one line of text")
    browser_timeout_s: float | None = setting(None, "browser_timeout", "float", "Time one page may take in the "
                                              "browser, loading and settling (default: timeout).", unit="s",
                                              above=0, optional=True)
    log_level: str = setting("INFO", "log_level", "choice", "How much to log on stderr.",
                             choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    # `discover`'s own: a visit of a new site goes slower than a run of a known one (there also --rate, --timeout)
    discover_rate_per_s: float = setting(DISCOVER_RATE_PER_S, "discover_rate", "float", "discover's own requests "
                                         "per second (robots.txt may lower it).", unit="requests/s", above=0)
    discover_timeout_s: float = setting(DISCOVER_TIMEOUT_S, "discover_timeout", "float", "discover: time one "
                                        "answer (or one rendered page) may take.", unit="s", above=0)
    workers: int = setting(WORKERS, "workers", "int", "Worker processes.", at_least=1)
    inflight: int | None = setting(None, "inflight", "int", "Jobs each worker keeps in flight, each its own "
                                   "claim, lease and request (default: from the rate by Little's law with room "
                                   "for the spread of answer times, at least 2, at most 4; 2 up to 66/s and 3 at "
                                   "100/s with 4 workers).", at_least=1, optional=True)
    rate_per_s: float = setting(RATE_PER_S, "rate", "float", "Requests per second to a site, shared by every "
                                "worker (and a walk's).", unit="requests/s", above=0)
    burst: int = setting(BURST, "burst", "int", "Requests the site allows at once above the rate.", at_least=1)
    no_limit: bool = setting(False, "no_limit", "bool", "Switch the rate limiter off (your own server only).")
    max_attempts: int = setting(MAX_ATTEMPTS, "max_attempts", "int", "Attempts per job (and per n8n search page "
                                "of a walk) before it is `failed`.", at_least=1)
    memory_limit_mb: int = setting(MEMORY_LIMIT_MB, "memory_limit", "int", "Memory (PSS) ceiling of the whole pool, "
                                   "browsers included.", unit="MB", at_least=1)
    timeout_s: float = setting(TIMEOUT_S, "timeout", "float", "Time one whole answer may take: connection, headers "
                               "and body.", unit="s", above=0)
    max_answer_mb: int = setting(MAX_ANSWER_MB, "max_answer_mb", "int", "Largest answer accepted once "
                                 "decompressed; a larger one ends its job `too_large`.", unit="MB", at_least=1)
    max_open_cycles: int = setting(MAX_OPEN_CYCLES, "max_open_cycles", "int", "Failed probes in a row after which "
                                   "the run stops trying a domain (its jobs stay pending), once its breaker has "
                                   "been open for give_up_after.", at_least=1)
    lease_s: float = setting(LEASE_S, "lease", "float", "Time a claimed job stays a worker's between renewals "
                             "(longer than timeout); on PostgreSQL also how soon the jobs of a run that died on "
                             "another machine come back.", unit="s", above=0)
    min_free_mb: int = setting(MIN_FREE_MB, "min_free_mb", "int", "SQLite: free space the disk under the "
                               "database's folder must keep; under it a run stops taking jobs, hands back those in "
                               "flight and exits 74 (0: only when SQLite says the disk is full).", unit="MB",
                               at_least=0)
    lock_report_after_s: float = setting(LOCK_REPORT_AFTER_S, "lock_report_after", "float", "SQLite: time a run's "
                                         "writer waits for a lock another process holds (an analyst's BEGIN "
                                         "EXCLUSIVE) before it says who holds it; it keeps waiting, and says so "
                                         "again each time as long.", unit="s", above=0)
    with_page: bool = setting(False, "with_page", "bool", "Also fetch each template's n8n.io page (og:* tags).")
    breaker_failures: int = setting(BREAKER_FAILURES, "breaker_failures", "int", "Consecutive failed requests "
                                    "that open a domain's circuit breaker.", at_least=1)
    breaker_open_s: float = setting(BREAKER_OPEN_S, "breaker_open", "float", "Time an open breaker waits before "
                                    "one probe.", unit="s", above=0)
    max_jobs_per_worker: int = setting(MAX_JOBS_PER_WORKER, "max_jobs_per_worker", "int", "Recycle a worker after "
                                       "this many jobs.", at_least=1)
    backoff_base_s: float = setting(BACKOFF_BASE_S, "backoff_base", "float", "First retry delay; it doubles with "
                                    "each attempt.", unit="s", at_least=0)
    give_up_after_s: float = setting(GIVE_UP_AFTER_S, "give_up_after", "float", "Time a domain's breaker must "
                                     "have been open before the run gives it up (an outage, not a blip).",
                                     unit="s", at_least=0)
    adaptive: bool = setting(True, "adaptive", "bool", "Halve a domain's rate while the median of its last 40 "
                             "answers is over 200 ms and three times its first 40's, or over 20 % of them are "
                             "503; it climbs back within adaptive_recover after.")
    adaptive_recover_s: float = setting(ADAPTIVE_RECOVER_S, "adaptive_recover", "float", "Time a slowed domain "
                                        "takes to climb back from its floor (a tenth of its rate) to its rate.",
                                        unit="s", above=0)
    revalidate: bool = setting(True, "revalidate", "bool", "Keep each answer's validators (ETag, Last-Modified) "
                               "and send them when it is fetched again: a 304 is no new version; sitemap dates "
                               "are trusted once earned. A source's own `revalidate = false` turns it off there.")
    revalidate_sample: int = setting(REVALIDATE_SAMPLE, "revalidate_sample", "int", "Re-fetch in full one 304 in "
                                     "this many (and one unmoved sitemap date) to catch a server that lies; 0: "
                                     "never.", at_least=0)
    robots: str = setting(ROBOTS, "robots", "choice", "Obey each host's robots.txt (rules, Crawl-delay, "
                          "Request-rate), or ignore every host's rules with a warning.", choices=("obey", "ignore"))
    robots_ignore: tuple = setting((), "robots_ignore", "list", "Domains whose robots.txt is ignored knowingly (a "
                                   "warning at start); transcripts need youtube.com.",
                                   item=_matching(r"[a-z0-9.-]+", "a domain name such as youtube.com", str.lower),
                                   metavar="DOMAIN")
    transcripts: bool = setting(TRANSCRIPTS, "transcripts", "bool", "Fetch the transcript of every template's "
                                "YouTube videos (YouTube's robots.txt disallows it: see robots_ignore).")
    transcript_languages: tuple = setting(TRANSCRIPT_LANGUAGES, "transcript_languages", "list", "Preferred "
                                          "transcript languages; without a match any manual one, then any "
                                          "generated one.", check=bool, allowed="language codes such as en",
                                          item=_matching(r"[A-Za-z]{2,3}(-[A-Za-z0-9]+)*", "a language code "
                                                         "such as en or pt-BR"))
    domain_rates: tuple = setting((), "domain_rate", "list", "DOMAIN=RATE/BURST: a domain's own budget, over the "
                                  f"sources file (youtube.com: {YOUTUBE_RATE_PER_S:g}/{YOUTUBE_BURST}; others: their "
                                  "sources', else rate/burst).", item=parse_domain_rate, metavar="DOMAIN=RATE/BURST",
                                  show_item=lambda r: f"{r[0]}={r[1]:g}/{r[2]}")
    ping_url: str | None = setting(None, "ping_url", "url", "Cron monitoring (healthchecks.io, Uptime Kuma): "
                                   "URL/start, then URL on exit 0 or 75, else URL/fail.", optional=True)
    notify_url: str | None = setting(None, "notify_url", "url", 'POST {"text": ...} (Slack, Mattermost) here on any '
                                     "exit but 0 and 75.", optional=True)
    proxies: tuple = setting((), "proxies", "list", "Proxies every request goes through (http://, https:// or "
                             "socks5:// URLs, user:password@ allowed, ${NAME} read from the environment), plus "
                             "`direct` to go without one when none is usable; a source's own `proxies` win. "
                             "Without any, HTTP(S)_PROXY apply as usual; with some, they do not.",
                             item=proxies.parse, show_item=str, flag="--proxy", metavar="URL",
                             allowed="proxy URLs or direct")
    proxy_check_url: str | None = setting(None, "proxy_check_url", "url", "Probe each proxy with a GET of this URL "
                                          "before the run and after each quarantine (a 2xx: good).", optional=True)
    proxy_quarantine_s: float = setting(PROXY_QUARANTINE_S, "proxy_quarantine", "float", "First quarantine of a "
                                        "failed proxy; it doubles while it keeps failing, at most 1 h, with "
                                        "jitter.", unit="s", above=0)
    db_down_after_s: float = setting(DB_DOWN_AFTER_S, "db_down_after", "float", "PostgreSQL: time the database may "
                                     "stay unreachable (a restart, a failover, a silent network) while the run "
                                     "reconnects; past it the run ends with exit 69, nothing lost.", unit="s", above=0)
    db_connect_timeout_s: float = setting(DB_CONNECT_TIMEOUT_S, "db_connect_timeout", "float", "PostgreSQL: time "
                                          "one connection attempt may take.", unit="s", above=0)
    db_keepalive_s: float = setting(DB_KEEPALIVE_S, "db_keepalive", "float", "PostgreSQL: idle time before TCP "
                                    "keepalives probe the connection, and time sent data may stay unacknowledged "
                                    "(tcp_user_timeout) before the connection counts as lost.", unit="s", above=0)
    db_statement_timeout_s: float = setting(DB_STATEMENT_TIMEOUT_S, "db_statement_timeout", "float", "PostgreSQL: "
                                            "a run's statement (and a transaction left idle) is cancelled by the "
                                            "server after this long; a round trip unanswered for this long plus "
                                            "db_keepalive counts as a lost connection.", unit="s", above=0)
    etl_url: str | None = setting(None, "etl_url", "url", "The ETL API each run reports to (created with its items, "
                                  "item updates in batches, finalized with its counts; fed from the outbox).",
                                  optional=True)
    etl_key: webhooks.Secret | None = setting(None, "etl_key", "secret", "The ETL API's key (sent as a bearer token; "
                                              "shown nowhere: set it in the environment as SCRAPER_ETL_KEY).",
                                              optional=True, allowed="one line of text")
    retry_after_h: float = setting(RETRY_AFTER_H, "retry_after", "float", "`update` retries only failed jobs whose "
                                   "last failure is older than this.", unit="h", at_least=0)
    # not settings: fixed values (the guide names them), and what a command adds
    stop_grace_s: float = STOP_GRACE_S
    pause_429_s: float = PAUSE_429_S
    pause_max_s: float = PAUSE_MAX_S
    sources: tuple = BUILTIN_SOURCES    # base.sources.Source, from the sources file (or the built-in n8n)
    run_sources: tuple | None = None    # the sources a run works (`run --source NAME`); None: every enabled one
    webhooks: tuple = ()                # base.webhooks.Endpoint, from the configuration file's [[webhook]] tables

    def rate_for(self, domain):
        """(rate_per_s, burst) of a politeness domain: --domain-rate, else the sources file (the lowest
        rate of the sources on that domain: they share its bucket), else youtube.com's own, else --rate."""
        for name, rate, burst in self.domain_rates:
            if name == domain:
                return rate, burst
        configured = self.configured_rate(domain)
        if configured is not None:
            return configured
        if domain == YOUTUBE_DOMAIN:
            return YOUTUBE_RATE_PER_S, YOUTUBE_BURST
        return self.rate_per_s, self.burst

    def configured_rate(self, domain, sources=None):
        """(rate_per_s, burst) the sources file gives `domain` (the lowest of `sources`, default all that
        name it), or None when none does; a source's missing half is the default's."""
        found = [(s.rate or self.rate_per_s, s.burst or self.burst) for s in (sources or self.sources)
                 if (s.rate is not None or s.burst is not None) and domain in self.source_domains(s)]
        if not found:
            return None
        return min(r for r, _ in found), min(b for _, b in found)

    def source_domains(self, source: Source) -> tuple[str, ...]:
        """The politeness domains of a source's own site (its `rate` and `burst` apply to them)."""
        if source.kind == "n8n":
            return (self.domain,)
        hosts = [source.opt("site")] + [f"http://{d}/" for d in source.opt("allow_domains", ())]
        return tuple(dict.fromkeys(domain_of(h) for h in hosts if h))

    def source(self, name):
        """The source called `name`, or None."""
        return next((s for s in self.sources if s.name == name), None)

    @functools.cached_property      # frozen: computed once (seeding a million ids asked a million times)
    def n8n_source(self):
        """The name of the n8n source (its jobs and their youtube jobs are its), `n8n` without one."""
        return next((s.name for s in self.sources if s.kind == "n8n"), "n8n")

    @property
    def working_sources(self) -> tuple[Source, ...]:
        """The sources whose jobs this run works: enabled, and named by `run_sources` unless that is None."""
        return tuple(s for s in self.sources if s.enabled and (self.run_sources is None or s.name in self.run_sources))

    @functools.cached_property      # frozen: computed once, as `n8n_source`
    def domain(self):
        """The politeness domain: both n8n hosts share one budget, keyed by the site's host."""
        return domain_of(self.site_url)

    @functools.cached_property
    def uses_proxies(self):
        """Some proxy list is set (the run's or a source's): requests follow the pool, not HTTP(S)_PROXY."""
        return bool(self.proxies or any(s.proxies for s in self.sources))

    def browser_of(self, source: Source | None) -> endpoints.Plan:
        """The browser a source's pages use: its own browser_* keys, else the run's (None: the run's)."""
        def own(key, default):
            return default if source is None else source.opt(key, default)
        endpoint = own("browser_endpoint", self.browser_endpoint)
        return endpoints.Plan(endpoint, own("browser_sessions", self.browser_sessions),
                              own("browser_session_pages", self.browser_session_pages),
                              own("browser_session_timeout", self.browser_session_timeout_s),
                              own("browserbase_url", self.browserbase_url) if endpoint.kind == "browserbase"
                              else None)

    @functools.cached_property
    def browsers(self) -> dict[bool, endpoints.Plan]:
        """The browsers of the run's sources that render pages (fetcher browser or auto), by where they render
        ({False: the local plan, True: the remote one}; a worker drives at most one of each); ConfigError when
        two such sources ask for different local browsers, or for different remote ones."""
        plans: dict = {}
        for src in self.working_sources:
            if src.opt("fetcher", "http") in ("browser", "auto"):
                plan = self.browser_of(src)
                plans.setdefault(plan.endpoint.remote, {}).setdefault(plan.key, (plan, []))[1].append(src.name)
        for kind in plans.values():
            if len(kind) > 1:
                (a, names_a), (b, names_b) = list(kind.values())[:2]
                raise ConfigError(f"source {names_a[0]} renders with {a.endpoint} and source {names_b[0]} with "
                                  f"{b.endpoint} (or other browser_session settings); one run drives one local "
                                  f"and one remote browser for now: run them apart with --source.")
        return {remote: next(iter(kind.values()))[0] for remote, kind in plans.items()}

    @property
    def browser_deadline_s(self):
        """The deadline of one page in the browser: --browser-timeout, else --timeout."""
        return self.timeout_s if self.browser_timeout_s is None else self.browser_timeout_s

    @property
    def max_answer_bytes(self):
        return self.max_answer_mb * 2**20

    @property
    def postgres(self):
        """The database is a PostgreSQL URL (many machines), not a SQLite file."""
        return is_db_url(self.db_path)

    @property
    def db_shown(self):
        """The database as logs and errors may show it: a URL without its password."""
        return redact_db_url(self.db_path)

    @property
    def limiter_path(self):
        return self.db_path + "-limiter"

    @property
    def lock_path(self):
        return self.db_path + "-run.lock"

    @property
    def browser_lock_path(self):
        return self.db_path + "-browser.lock"

    @property
    def sessions_lock_path(self):
        """The remote browser sessions' slots (`browser_sessions`), apart from the local browsers'."""
        return self.db_path + "-sessions.lock"

    @property
    def db_files(self):
        """Every file that sits beside the database: the database with its WAL and shared memory, the limiter's
        file with its own, the limiter's flock file, the run lock and the browser slots' lock file (removing a
        database means removing all of them)."""
        if self.postgres:
            return ()
        db, limiter = self.db_path, self.limiter_path
        return (db, db + "-wal", db + "-shm", limiter, limiter + "-wal", limiter + "-shm",
                limiter + ".lock", self.lock_path, self.browser_lock_path, self.sessions_lock_path,
                db + "-robots.lock", self.reserve_path)

    @property
    def reserve_path(self):
        """The space a run keeps beside a SQLite database for its last writes when the disk fills (`db/disk`)."""
        return self.db_path + "-reserve"

    @property
    def worker_share_mb(self):
        """Each worker's part of the ceiling once the supervisor's is set aside (planning figure)."""
        return (self.memory_limit_mb - PROCESS_MB) / self.workers


SPECS = specs_of(Settings)      # {key: Spec}: every setting, in declaration order
FIELDS = {spec.field: spec for spec in SPECS.values()}


def build(**values):
    """Frozen Settings from `values` (fields), each checked by its declaration, then across settings here;
    ConfigError (one sentence) on the first bad one."""
    values = {k: FIELDS[k].parse(v, "the caller") if k in FIELDS else v for k, v in values.items() if v is not None}
    s = Settings(**values)
    n8n = next((src for src in s.sources if src.kind == "n8n"), None)
    if n8n is not None:     # the file's n8n URLs win over api_url/site_url, which are their defaults
        s = dataclasses.replace(s, api_url=n8n.opt("api_url", s.api_url), site_url=n8n.opt("site_url", s.site_url))
    unknown = [name for name in s.run_sources or () if s.source(name) is None]
    _check(not unknown, f"--source {unknown[0] if unknown else ''}: no such source"
                        f"{' in ' + s.sources_path if s.sources_path else ' (the only one is n8n)'}.")
    _check(s.lease_s > s.timeout_s, f"the lease ({s.lease_s:g} s) must be longer than the timeout "
                                    f"({s.timeout_s:g} s).")
    _check(s.browser_timeout_s is None or s.browser_timeout_s < s.lease_s,
           f"the browser_timeout must be below the lease of {s.lease_s:g} s (got {s.browser_timeout_s}).")
    _check(s.memory_limit_mb >= 2 * PROCESS_MB,
           f"the memory_limit of {s.memory_limit_mb} MB is too small to run one worker (the supervisor and one "
           f"worker need at least {2 * PROCESS_MB} MB).")
    _check(s.worker_share_mb >= MIN_SHARE_MB,
           f"the memory_limit of {s.memory_limit_mb} MB is too small for {s.workers} workers (each needs a share "
           f"of at least {MIN_SHARE_MB} MB; use fewer workers or a higher limit).")
    check_db_path(s.db_path)
    return s


def load(config_given=None, environ=None, cli=(), **extra):
    """(Settings, config.Resolved) from the layers: the configuration file (`config_given`, else ./scraper.toml
    when it exists), `environ`, the command line's (key, raw value, where) `cli` items; `extra`: the
    command's own values (run's `run_sources`). ConfigError (one sentence) on the first mistake."""
    path = config.config_path(config_given)
    document = config.read_toml(path, "configuration file") if path else {}
    table = config.file_table(document, path) if path else {}
    resolved = config.resolve(SPECS, table, path, os.environ if environ is None else environ, cli)
    loaded, sources_path = of_config(resolved.values["sources"], document, path)
    values = {SPECS[key].field: value for key, value in resolved.values.items()}
    hooks = webhooks.parse(document.get("webhook"), path, dict(os.environ if environ is None else environ))
    return build(**{**values, "sources_path": sources_path}, sources=loaded, webhooks=hooks, **extra), resolved


def check_db_path(path):
    """The database must sit in an existing folder and, if it exists, be a SQLite file (whether its
    schema can be read is `db.runstate.check_readable`'s, which the CLI runs next). A PostgreSQL URL is
    checked when it is opened."""
    if is_db_url(path):
        _check(bool(urlsplit(path).path.strip("/")) or "dbname=" in path,
               f"the database URL {redact_db_url(path)} names no database (postgresql://USER@HOST:PORT/DB).")
        return
    folder = os.path.dirname(os.path.abspath(path))
    _check(os.path.isdir(folder), f"the database folder {folder} does not exist.")
    _check(not os.path.isdir(path), f"the database path {path} is a folder, not a file.")
    # a database to be made in a folder that cannot be written (an existing one may still be read there)
    _check(os.path.exists(path) or (os.access(folder, os.W_OK | os.X_OK) and _creatable(folder)),
           f"cannot open the database {path}: the folder {folder} cannot be written (permission denied).")
    if os.path.exists(path):
        try:
            with open(path, "rb") as f:
                head = f.read(len(SQLITE_HEADER))
        except OSError as e:
            raise ConfigError(f"the database {path} cannot be read ({e.strerror}).") from e
        _check(head in (b"", SQLITE_HEADER), f"{path} is not a SQLite database.")


def _creatable(folder):
    """Whether a file can be made in `folder` (os.access trusts the mode bits, which root ignores)."""
    import tempfile
    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def _check(ok, sentence):
    if not ok:
        raise ConfigError(sentence)
