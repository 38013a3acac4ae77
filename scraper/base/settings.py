"""Defaults (with their units), validation, and the frozen Settings passed to every part."""

import dataclasses
import math
import os
import re
from urllib.parse import urlsplit

from scraper import __version__
from scraper.base.errors import ConfigError
from scraper.base.urls import domain_of

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
PROCESS_MB = 40             # measured: one process (Python, requests, sqlite) is about 35-40 MB resident
MIN_SHARE_MB = 24           # below this a worker would be recycled after every job, or never start
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
GIVE_UP_AFTER_S = 600.0     # a domain is given up only after its breaker has been open this long (an outage)
ROBOTS = "obey"             # robots.txt: obey or ignore
REFRESH_DAYS = 30           # `refresh`: re-fetch templates not fetched for this long (edits the listing hides)

ENV_DB = "SCRAPER_DB"
ENV_API_URL = "SCRAPER_API_URL"
ENV_SITE_URL = "SCRAPER_SITE_URL"
ENV_USER_AGENT = "SCRAPER_USER_AGENT"
ENV_YOUTUBE_URL = "SCRAPER_YOUTUBE_URL"
ENV_TRANSCRIPTS = "SCRAPER_TRANSCRIPTS"
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
    transcripts: bool = True
    transcript_languages: tuple = TRANSCRIPT_LANGUAGES
    domain_rates: tuple = ()    # ((domain, rate_per_s, burst), ...) from --domain-rate
    robots: str = ROBOTS
    robots_ignore: tuple = ()   # domains whose robots.txt is ignored knowingly (--robots-ignore)
    adaptive: bool = True
    give_up_after_s: float = GIVE_UP_AFTER_S

    def rate_for(self, domain):
        """(rate_per_s, burst) of a politeness domain: --domain-rate, else youtube.com's own, else --rate."""
        for name, rate, burst in self.domain_rates:
            if name == domain:
                return rate, burst
        if domain == YOUTUBE_DOMAIN:
            return YOUTUBE_RATE_PER_S, YOUTUBE_BURST
        return self.rate_per_s, self.burst

    @property
    def domain(self):
        """The politeness domain: both n8n hosts share one budget, keyed by the site's host."""
        return domain_of(self.site_url)

    @property
    def max_answer_bytes(self):
        return self.max_answer_mb * 2**20

    @property
    def limiter_path(self):
        return self.db_path + "-limiter"

    @property
    def lock_path(self):
        return self.db_path + "-run.lock"

    @property
    def db_files(self):
        """Every file that sits beside the database: the database with its WAL and shared memory, the
        limiter's file with its own, the limiter's flock file and the run lock (removing a database
        means removing all of them)."""
        db, limiter = self.db_path, self.limiter_path
        return (db, db + "-wal", db + "-shm", limiter, limiter + "-wal", limiter + "-shm",
                limiter + ".lock", self.lock_path, db + "-robots.lock")

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
    _check_url("API URL", s.api_url)
    _check_url("site URL", s.site_url)
    _check(bool(s.user_agent.strip()) and s.user_agent.isprintable() and s.user_agent.isascii(),
           f"--user-agent must be one line of printable ASCII text (got {s.user_agent!r}).")
    _check_url("YouTube URL", s.youtube_url)
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
    schema can be read is `db.store.check_readable`'s, which the CLI runs next)."""
    folder = os.path.dirname(os.path.abspath(path))
    _check(os.path.isdir(folder), f"the database folder {folder} does not exist.")
    _check(not os.path.isdir(path), f"the database path {path} is a folder, not a file.")
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


def _check(ok, sentence):
    if not ok:
        raise ConfigError(sentence)
