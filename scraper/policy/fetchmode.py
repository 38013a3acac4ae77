"""Pure policy of `fetcher = "auto"`: which path (plain HTTP or the browser) a page takes, learned per
source and URL pattern.

- Plain HTTP first. The same URL is rendered in the browser at once when the fields found (required plus
  optional) fall under `MIN_FOUND`, or a required field is missing.
- The verdict is kept per source and URL pattern (`pattern_of`: the path with ids and numbers
  generalised), so later pages of a browser pattern go straight to the browser.
- About one page in `RECHECK_EVERY` of a learned pattern is re-checked on the other path, chosen by a hash
  of its URL (`is_recheck`, so tests can predict which). After `AGREEING_TO_MOVE` re-checks in a row that
  found the other path better (for a browser pattern: plain HTTP sufficed), the pattern moves.
- A failed fetch (network, timeout, 5xx) teaches nothing; a re-check keeps only one result (the better).

Unlike Crawlee's adaptive crawler, a failed static fetch is not taken for a page that needs a browser, and a
re-check of a browser pattern that plain HTTP satisfies does not render the page as well.
"""

import dataclasses
import hashlib
import re
from urllib.parse import urlsplit

HTTP = "http"
BROWSER = "browser"
MODES = (HTTP, BROWSER, "auto")
MIN_FOUND = 0.7             # the share of wanted fields below which plain HTTP is not enough
RECHECK_EVERY = 10          # about 10 % of a learned pattern's pages are re-checked on the other path
AGREEING_TO_MOVE = 3        # re-checks in a row that favour the other path before the pattern moves

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_HEX_ID = re.compile(r"^(?=.*\d)[0-9a-f]{12,}$")
_SLUG_ID = re.compile(r"^[a-z][a-z0-9-_]*?[-_](\d+)$")       # jazz-night-42
_ID_SLUG = re.compile(r"^(\d+)[-_][a-z][a-z0-9-_]*$")         # 6270-telegram-bot
_DIGITS = re.compile(r"\d+")


def pattern_of(url):
    """The URL pattern of a page: its path, lower-cased, with ids and numbers generalised
    (`/events/jazz-night-42` -> `/events/{slug}-{n}`, `/p/2024/05` -> `/p/{n}/{n}`); query dropped."""
    path = urlsplit(url).path if "://" in url else url.split("?", 1)[0]
    out = []
    for seg in path.lower().strip("/").split("/"):
        if not seg:
            continue
        if _UUID.match(seg) or _HEX_ID.match(seg):
            out.append("{id}")
        elif _SLUG_ID.match(seg):
            out.append("{slug}-{n}")
        elif _ID_SLUG.match(seg):
            out.append("{n}-{slug}")
        else:
            out.append(_DIGITS.sub("{n}", seg))
    return "/" + "/".join(out)


def is_recheck(url):
    """Whether this page of a learned pattern is re-checked on the other path: a stable hash of the URL's
    path and query (not its scheme, host or port, so the same page is the same choice on any of them, and a
    test can predict which against a stand-in on any port)."""
    parts = urlsplit(url) if "://" in url else None
    page = (parts.path + (f"?{parts.query}" if parts.query else "")) if parts else url
    return int.from_bytes(hashlib.sha256(page.encode()).digest()[:4], "big") % RECHECK_EVERY == 0


@dataclasses.dataclass(frozen=True)
class Seen:
    """One fetch of a page by one path: whether it failed (network, timeout, 5xx), and what it found."""

    failed: bool = False
    found: int = 0              # wanted fields found
    enough: bool = False        # every required field, and at least MIN_FOUND of the wanted ones


def seen(found, required, fields, failed=False):
    """`Seen` of a fetch that found the field names `found`, for a source wanting `required` + `fields`."""
    if failed:
        return Seen(failed=True)
    wanted = set(required) | set(fields)
    got = set(found) & wanted
    enough = set(required) <= got and (not wanted or len(got) >= MIN_FOUND * len(wanted))
    return Seen(found=len(got), enough=enough)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a pattern learnt: its path, and the re-checks in a row that favoured the other one."""

    path: str = HTTP
    agreeing: int = 0


@dataclasses.dataclass(frozen=True)
class Plan:
    first: str                  # the path tried first
    recheck: bool               # this page is one of the pattern's re-checks


def plan(verdict, url):
    """Which path a page takes first. A browser pattern's re-check tries plain HTTP first (the cheap
    path, which is what it checks); an http pattern's re-check is plain HTTP then the browser as well."""
    if verdict is None:
        return Plan(HTTP, False)
    recheck = is_recheck(url)
    if verdict.path == BROWSER:
        return Plan(HTTP if recheck else BROWSER, recheck)
    return Plan(HTTP, recheck)


def then_browser(verdict, p, http):
    """After the plain HTTP fetch (`http`, a Seen): whether the page is also rendered in the browser."""
    if http.failed:
        return False            # the attempt fails as any failed fetch does; it teaches nothing
    if not http.enough:
        return True             # at once, whatever the pattern says
    return p.recheck and verdict is not None and verdict.path == HTTP


@dataclasses.dataclass(frozen=True)
class Learned:
    verdict: Verdict = None     # the pattern's verdict after this page (None: still nothing learned)
    changed: bool = False       # the pattern's path changed
    keep: str = None            # the path whose result is stored (None: neither gave one)
    recheck: bool = False       # this page was a re-check


def learn(verdict, p, http=None, browser=None):
    """What a page's fetches teach its pattern, and which one result is kept."""
    keep = _better(http, browser)
    if (http is not None and http.failed) or (browser is not None and browser.failed):
        return Learned(verdict, False, keep, p.recheck)         # a failed fetch teaches nothing
    if verdict is None or not p.recheck:
        if http is not None and http.enough:
            path = HTTP if verdict is None else verdict.path
        elif browser is not None and browser.enough:
            path = BROWSER
        else:
            return Learned(verdict, False, keep, False)         # neither path has the fields: nothing to learn
        new = Verdict(path, verdict.agreeing if verdict is not None and path == verdict.path else 0)
        return Learned(new, verdict is not None and path != verdict.path, keep, False)
    # a re-check: did the other path do better?
    if verdict.path == BROWSER:
        favours_other = http is not None and http.enough
    else:
        favours_other = (browser is not None and browser.enough
                         and (http is None or not http.enough or browser.found > http.found))
    agreeing = verdict.agreeing + 1 if favours_other else 0
    if agreeing >= AGREEING_TO_MOVE:
        return Learned(Verdict(_other(verdict.path), 0), True, keep, True)
    return Learned(Verdict(verdict.path, agreeing), False, keep, True)


def _other(path):
    return BROWSER if path == HTTP else HTTP


def _better(http, browser):
    """The one result to store: the path that found more (plain HTTP on a tie), failed fetches left out."""
    ok = [(s.found, path) for path, s in ((HTTP, http), (BROWSER, browser)) if s is not None and not s.failed]
    if not ok:
        return None
    best = max(found for found, _ in ok)
    return next(path for found, path in ok if found == best)
