"""Defaults (with their units), validation, and the frozen Settings passed to every part."""

import dataclasses
import functools
import math
import os
import re
from urllib.parse import urlsplit

from scraper import __version__
from scraper.base.errors import ConfigError
from scraper.base.sources import BUILTIN as BUILTIN_SOURCES
from scraper.base.sources import Source
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
BUSY_PROCESS_MB = 40        # measured (2026-11): the same process once it has worked jobs (protego, the parsers):
                            # 30-40 MB of PSS; the browsers are planned on it
# Measured: a real 4-worker `auto` run with 2 browsers peaked at 977-1043 MB of PSS: the python processes
# 181 MB, Chromium's processes about 210 MB a browser, and each browser's Playwright driver (node) about
# 180 MB. So a browser costs about 390-430 MB with its driver; with 430, 4 workers under 1 GB get one
# browser and the pool stays under its ceiling (2 browsers went over it under load).
BROWSER_MB = 430
MIN_SHARE_MB = 12           # below this a worker would be recycled after every job, or never start
TIMEOUT_S = 30.0            # the whole answer of one request: connect, headers and body
MAX_ANSWER_MB = 50          # decoded; a template answer is 5-60 KB (Scrapy's DOWNLOAD_MAXSIZE is 1 GB, warns at 32 MB)
MAX_OPEN_CYCLES = 3         # failed probes in a row after which a run stops trying a domain
LEASE_S = 90.0              # must outlast one rate-limit wait + one request; extended before each fetch
BACKOFF_BASE_S = 1.0        # 1 s, 2 s, 4 s ... up to retry.BACKOFF_MAX_S
PAUSE_429_S = 1.0           # domain pause after a 429 without Retry-After; doubles while 429s continue
PAUSE_MAX_S = 300.0
BREAKER_FAILURES = 10       # consecutive failed requests that open a domain's breaker
BREAKER_OPEN_S = 60.0
MAX_JOBS_PER_WORKER = 500   # recycle a worker after this many jobs (bounds slow leaks)
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
GIVE_UP_AFTER_S = 600.0     # a domain is given up only after its breaker has been open this long (an outage)
ROBOTS = "obey"             # robots.txt: obey or ignore
REFRESH_DAYS = 30           # `refresh`: re-fetch templates not fetched for this long (edits the listing hides)
RETRY_AFTER_H = 24          # `update`: retry a failed job only a day after it failed (a 403 stays a 403)

ENV_DB = "SCRAPER_DB"
ENV_API_URL = "SCRAPER_API_URL"
ENV_SITE_URL = "SCRAPER_SITE_URL"
ENV_USER_AGENT = "SCRAPER_USER_AGENT"
ENV_YOUTUBE_URL = "SCRAPER_YOUTUBE_URL"
ENV_TRANSCRIPTS = "SCRAPER_TRANSCRIPTS"
ENV_BROWSER = "SCRAPER_BROWSER"
ENV_PING_URL = "SCRAPER_PING_URL"
ENV_NOTIFY_URL = "SCRAPER_NOTIFY_URL"
ENV_ROBOTS = "SCRAPER_ROBOTS"
ENV_ROBOTS_IGNORE = "SCRAPER_ROBOTS_IGNORE"
ENV_ADAPTIVE = "SCRAPER_ADAPTIVE"

SQLITE_HEADER = b"SQLite format 3\x00"


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything a run needs, validated once by `build`, then never changed."""

    db_path: str = DB_PATH
    api_url: str = API_URL
    site_url: str = SITE_URL
    user_agent: str = USER_AGENT
    workers: int = WORKERS
    rate_per_s: float = RATE_PER_S
    burst: int = BURST
    limiter: bool = True
    max_attempts: int = MAX_ATTEMPTS
    memory_limit_mb: int = MEMORY_LIMIT_MB
    timeout_s: float = TIMEOUT_S
    max_answer_mb: int = MAX_ANSWER_MB
    max_open_cycles: int = MAX_OPEN_CYCLES
    lease_s: float = LEASE_S
    with_page: bool = False
    breaker_failures: int = BREAKER_FAILURES
    breaker_open_s: float = BREAKER_OPEN_S
    max_jobs_per_worker: int = MAX_JOBS_PER_WORKER
    stop_grace_s: float = STOP_GRACE_S
    backoff_base_s: float = BACKOFF_BASE_S
    pause_429_s: float = PAUSE_429_S
    pause_max_s: float = PAUSE_MAX_S
    youtube_url: str = YOUTUBE_URL
    transcripts: bool = TRANSCRIPTS
    transcript_languages: tuple = TRANSCRIPT_LANGUAGES
    domain_rates: tuple = ()    # ((domain, rate_per_s, burst), ...) from --domain-rate
    sources: tuple = BUILTIN_SOURCES    # base.sources.Source, from the sources file (or the built-in n8n)
    sources_path: str = None    # the sources file read, None without one
    run_sources: tuple = ()     # `run --source NAME`: only these sources' jobs (empty: every enabled one)
    browser_path: str = BROWSER
    browser_timeout_s: float = None     # one page in the browser, navigation and settling; None: timeout_s
    ping_url: str | None = None     # cron monitoring: URL/start, URL, URL/fail (scraper.net.notify)
    notify_url: str | None = None   # a chat webhook told of a run that did not end well
    browserless: tuple = ()     # sources that need a browser when none can be started: not worked, left pending
    robots: str = ROBOTS
    robots_ignore: tuple = ()   # domains whose robots.txt is ignored knowingly (--robots-ignore)
    adaptive: bool = True
    give_up_after_s: float = GIVE_UP_AFTER_S

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
        """The sources whose jobs this run works: enabled, named by `run --source` when given, and not one
        that needs a browser none can start (`browserless`: its jobs are neither claimed nor waited for)."""
        return tuple(s for s in self.sources if s.enabled and (not self.run_sources or s.name in self.run_sources)
                     and s.name not in self.browserless)

    @functools.cached_property      # frozen: computed once, as `n8n_source`
    def domain(self):
        """The politeness domain: both n8n hosts share one budget, keyed by the site's host."""
        return domain_of(self.site_url)

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
    def browser_slots(self):
        """How many browsers may be open at once in the pool: what fits under --memory-limit once the
        supervisor and the workers have their part, at least one, at most one per worker."""
        room = self.memory_limit_mb - BUSY_PROCESS_MB * (self.workers + 1)
        return max(1, min(self.workers, int(room // BROWSER_MB)))

    @property
    def db_files(self):
        """Every file that sits beside the database: the database with its WAL and shared memory, the
        limiter's file with its own, the limiter's flock file, the run lock and the browser slots' lock
        file (removing a database
        means removing all of them)."""
        if self.postgres:
            return ()
        db, limiter = self.db_path, self.limiter_path
        return (db, db + "-wal", db + "-shm", limiter, limiter + "-wal", limiter + "-shm",
                limiter + ".lock", self.lock_path, self.browser_lock_path, db + "-robots.lock")

    @property
    def worker_share_mb(self):
        """Each worker's part of the ceiling once the supervisor's is set aside (planning figure)."""
        return (self.memory_limit_mb - PROCESS_MB) / self.workers


def parse_domain_rate(text):
    """(domain, rate_per_s, burst) from DOMAIN=RATE/BURST (e.g. youtube.com=0.5/3); ConfigError if malformed."""
    match = re.fullmatch(r"\s*([A-Za-z0-9.-]+)\s*=\s*([0-9]*\.?[0-9]+)\s*/\s*([0-9]+)\s*", text or "")
    if not match:
        raise ConfigError(f"--domain-rate {text!r} is not DOMAIN=RATE/BURST (for example youtube.com=0.5/3).")
    return match.group(1).lower(), float(match.group(2)), int(match.group(3))


def parse_domains(texts):
    """('youtube.com', 'example.org') from repeated and/or comma-separated domain names."""
    out = []
    for text in texts or ():
        out += [part.strip().lower() for part in text.split(",") if part.strip()]
    return tuple(dict.fromkeys(out))


def parse_languages(text):
    """('en', 'de') from 'en,de'."""
    return tuple(part.strip() for part in (text or "").split(",") if part.strip())


def build(**values):
    """Validate `values` and return frozen Settings; ConfigError (one sentence) on the first bad one."""
    values = {k: v for k, v in values.items() if v is not None}
    s = Settings(**values)
    n8n = next((src for src in s.sources if src.kind == "n8n"), None)
    if n8n is not None:     # the file's n8n URLs win over --api-url/--site-url, which are their defaults
        s = dataclasses.replace(s, api_url=n8n.opt("api_url", s.api_url), site_url=n8n.opt("site_url", s.site_url))
    unknown = [name for name in s.run_sources if s.source(name) is None]
    _check(not unknown, f"--source {unknown[0] if unknown else ''}: no such source"
                        f"{' in ' + s.sources_path if s.sources_path else ' (the only one is n8n)'}.")
    _check_url("API URL", s.api_url)
    _check_url("site URL", s.site_url)
    _check(bool(s.user_agent.strip()) and s.user_agent.isprintable() and s.user_agent.isascii(),
           f"--user-agent must be one line of printable ASCII text (got {s.user_agent!r}).")
    _check_url("YouTube URL", s.youtube_url)
    if s.ping_url:
        _check_url("--ping-url", s.ping_url)
    if s.notify_url:
        _check_url("--notify-url", s.notify_url)
    _check(bool(s.transcript_languages) and all(re.fullmatch(r"[A-Za-z]{2,3}(-[A-Za-z0-9]+)*", c)
                                                for c in s.transcript_languages),
           f"--transcript-languages must be language codes such as en or pt-BR "
           f"(got {','.join(s.transcript_languages)!r}).")
    for name, rate, burst in s.domain_rates:
        _check(rate > 0 and math.isfinite(rate), f"--domain-rate {name}: the rate must be above 0 (got {rate:g}).")
        _check(burst >= 1, f"--domain-rate {name}: the burst must be at least 1 (got {burst}).")
    _check(s.robots in ("obey", "ignore"), f"--robots must be obey or ignore (got {s.robots!r}).")
    for name in s.robots_ignore:
        _check(re.fullmatch(r"[a-z0-9.-]+", name) is not None,
               f"--robots-ignore {name!r} is not a domain name (for example youtube.com).")
    _check(s.give_up_after_s >= 0, f"--give-up-after must not be negative (got {s.give_up_after_s:g}).")
    _check(s.workers >= 1, f"--workers must be at least 1 (got {s.workers}).")
    _check(s.rate_per_s > 0 and math.isfinite(s.rate_per_s),
           f"--rate must be a number of requests per second above 0 (got {s.rate_per_s:g}).")
    _check(s.burst >= 1, f"--burst must be at least 1 (got {s.burst}).")
    _check(s.max_attempts >= 1, f"--max-attempts must be at least 1 (got {s.max_attempts}).")
    _check(s.timeout_s > 0, f"--timeout must be above 0 seconds (got {s.timeout_s:g}).")
    _check(s.max_answer_mb >= 1, f"--max-answer-mb must be at least 1 (got {s.max_answer_mb}).")
    _check(s.max_open_cycles >= 1, f"--max-open-cycles must be at least 1 (got {s.max_open_cycles}).")
    _check(s.max_jobs_per_worker >= 1, f"--max-jobs-per-worker must be at least 1 (got {s.max_jobs_per_worker}).")
    _check(s.breaker_failures >= 1, f"--breaker-failures must be at least 1 (got {s.breaker_failures}).")
    _check(s.breaker_open_s > 0, f"--breaker-open must be above 0 seconds (got {s.breaker_open_s:g}).")
    _check(s.backoff_base_s >= 0, f"--backoff-base must not be negative (got {s.backoff_base_s:g}).")
    _check(s.lease_s > s.timeout_s, f"the lease ({s.lease_s:g} s) must be longer than --timeout ({s.timeout_s:g} s).")
    _check(s.browser_timeout_s is None or 0 < s.browser_timeout_s < s.lease_s,
           f"--browser-timeout must be above 0 and below the lease of {s.lease_s:g} s (got {s.browser_timeout_s}).")
    _check(bool(s.browser_path.strip()), "--browser-path must name a Chromium executable (a path or a name on PATH).")
    _check(
        s.memory_limit_mb >= 2 * PROCESS_MB,
        f"--memory-limit {s.memory_limit_mb} MB is too small to run one worker "
        f"(the supervisor and one worker need at least {2 * PROCESS_MB} MB).",
    )
    _check(
        s.worker_share_mb >= MIN_SHARE_MB,
        f"--memory-limit {s.memory_limit_mb} MB is too small for {s.workers} workers "
        f"(each needs a share of at least {MIN_SHARE_MB} MB; use fewer workers or a higher limit).",
    )
    check_db_path(s.db_path)
    return s


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


def _check_url(what, url):
    parts = urlsplit(url)
    _check(parts.scheme in ("http", "https") and bool(parts.hostname), f"the {what} {url!r} is not an http(s) URL.")


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
