"""The one exception hierarchy of scraper."""

from __future__ import annotations


class ScraperError(Exception):
    """Base of every error scraper raises on purpose."""


class ConfigError(ScraperError):
    """A setting or an input the user gave is not usable (exit code 2)."""


class RunLocked(ScraperError):
    """Another `scraper run` holds this database (exit code 75)."""


class ParseError(ScraperError):
    """An answer could not be understood (truncated JSON, a missing field)."""

    def __init__(self, message: str, url: str | None = None) -> None:
        super().__init__(message)
        self.url = url


class FetchError(ScraperError):
    """A request did not give a usable answer; `kind` names the failure."""

    def __init__(self, kind: str, message: str, url: str | None = None, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.url = url
        self.status = status
        self.retry_after = retry_after

    def brief(self) -> str:
        """The failure in a few words for the log (urllib3's own text runs to hundreds of characters)."""
        if self.status is None:
            return f"{self.kind} ({str(self).split(':', 1)[0]})"
        return str(self)


class JobInvalid(ScraperError):
    """The job names something that has nothing to fetch (no transcript, a removed video): final."""

    def __init__(self, kind: str, message: str, result=None) -> None:
        super().__init__(message)
        self.kind = kind
        self.result = result    # a site's Result written with the job's end (a refused answer, kept)


class HandedBack(ScraperError):
    """A stop came while the job waited for its turn; the job was handed back unfinished."""


class SessionLost(ScraperError):
    """A remote browser session dropped under a page (the provider's doing, neither the job's nor the site's):
    the page is tried again on a new session."""


# The database's errors, the same on both backends (each backend's connection raises these in place of its
# driver's; PEP 249's names). Not ScraperErrors: nothing raises them on purpose, and code that reports a
# ScraperError as the user's problem must still see a database failure as unexpected.
class DatabaseError(Exception):
    """A statement failed in the database (the engine's message kept)."""


class OperationalError(DatabaseError):
    """The database could not run a statement: locked or busy, interrupted, read-only, refused as written."""


class DatabaseUnavailable(OperationalError):
    """The connection to the database was lost or could not be made (a restart, a silent network): the
    database's outage, never a job's or a site's; the connection makes a new one at its next statement."""


class DiskFull(OperationalError):
    """The disk under the database is full (SQLite's SQLITE_FULL): nothing more can be written there."""


class IntegrityError(DatabaseError):
    """A constraint refused a row (a duplicate key, a missing parent)."""


class Stopped(BaseException):
    """SIGINT or SIGTERM arrived (`code` 130 or 143). A BaseException, like KeyboardInterrupt, so that no
    `except Exception` swallows it and every `finally` on the way out (temporary files) runs."""

    def __init__(self, signum, code):
        super().__init__(f"stopped by signal {signum}")
        self.signum = signum
        self.code = code


class RobotsDisallowed(JobInvalid):
    """The host's robots.txt disallows the URL for our product token: the job ends `invalid`, kind `robots`."""

    def __init__(self, message):
        super().__init__("robots", message)


class RobotsUnavailable(ScraperError):
    """The host's robots.txt could not be fetched (5xx, 429, no answer) after retries: the host is fully
    disallowed for this run (RFC 9309). The message is the operator's one sentence."""

    def __init__(self, host, why):
        self.host = host
        self.why = why      # the HTTP status, or the failure kind when no usable answer came
        name = host.split("://", 1)[-1]
        super().__init__(f"robots.txt of {name} could not be fetched ({why}); nothing was sent to {name}")


class DomainResting(ScraperError):
    """The domain's breaker is open (its requests kept failing, or it blocks us): a request with no job to
    hand back (a walk's) is refused, nothing sent. The message is the operator's one sentence."""


class DatabaseDown(ScraperError):
    """The database stayed unreachable past `db_down_after` (exit code 69). The message is the operator's one
    sentence."""


class BudgetSpent(ScraperError):
    """A one-off visit (`scraper discover`) has sent every request it may; nothing more is sent."""
