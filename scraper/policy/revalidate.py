"""Pure rules of cheap refreshes (issue 43): which validators a refresh sends, what a 304 keeps of the stored
headers, when a server is taken to ignore validators or to lie about them, which answers are sampled to
check, and when a source's sitemap `lastmod` is trusted. The client's side (the I/O) is
`politeness/revalidation`; the rows are `db/validators`'. Facts behind each rule: RFC 9110/9111 and the
crawlers compared in the project's notes (Heritrix, Scrapy, requests-cache, wget)."""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

UNKNOWN, USED, IGNORED, UNRELIABLE = "unknown", "used", "ignored", "unreliable"
STATES = (UNKNOWN, USED, IGNORED, UNRELIABLE)

ROBOTS, SITEMAP, LISTING, ITEM = "robots", "sitemap", "listing", "item"    # endpoint kinds of a source

IGNORED_AFTER = 3       # conditional requests answered 200 with the very content stored, and never a 304: the
                        # server ignores validators (wget's "server ignored If-Modified-Since"); not sent again
LASTMOD_TRUST_AFTER = 3     # sampled pages whose unmoved `lastmod` proved true before the dates are trusted
SAME_DAY_SHARE = 0.9    # a walk where this share of the pages carry one and the same lastmod day: the build date
SAME_DAY_MIN = 20       # ... counted only over this many pages or more

# the answer's header fields kept beside its validators (RFC 9110 §15.4.5: what a 304 repeats, and the body's own)
KEPT = ("etag", "last-modified", "date", "cache-control", "expires", "vary", "content-location", "content-type",
        "content-encoding", "content-length")
# what a 304 never replaces (RFC 9111 §3.2): the stored body's own length and coding
NEVER_FROM_304 = ("content-encoding", "content-length")
VIEW_COUNTERS = ("views", "totalViews", "recentViews")   # move daily; never a change of content


def kept(headers: Mapping[str, str]) -> dict[str, str]:
    """The header fields kept with an answer, their values exactly as received (a weak `W/` included)."""
    return {k.lower(): v for k, v in headers.items() if k.lower() in KEPT}


def merged(stored: Mapping[str, str], not_modified: Mapping[str, str]) -> dict[str, str]:
    """The stored fields freshened by a 304's (RFC 9111 §4.3.4): a field the 304 omits (its ETag, say) stays
    as stored, so the next request is still conditional; Content-Encoding and Content-Length never move."""
    out = dict(stored)
    out.update((k, v) for k, v in kept(not_modified).items() if k not in NEVER_FROM_304)
    return out


def varies_always(headers: Mapping[str, str]) -> bool:
    """`Vary: *`: no stored answer ever serves a new request (RFC 9110 §12.5.5)."""
    return any(v.strip() == "*" for v in headers.get("vary", "").split(","))


def conditional(headers: Mapping[str, str], stored_encoding: str, encoding: str) -> dict[str, str]:
    """The request's validators: the stored ETag and Last-Modified verbatim (never a date of ours), only when
    the request headers they depend on (Accept-Encoding) are those they were given under; {} otherwise."""
    if stored_encoding != encoding or varies_always(headers):
        return {}
    out = {}
    if headers.get("etag"):
        out["If-None-Match"] = headers["etag"]
    if headers.get("last-modified"):
        out["If-Modified-Since"] = headers["last-modified"]
    return out


def has_validator(headers: Mapping[str, str]) -> bool:
    return bool(headers.get("etag") or headers.get("last-modified")) and not varies_always(headers)


def without_view_counters(obj: Any) -> Any:
    """The answer with the view counters left out, at its top level and in its `workflow` object."""
    if not isinstance(obj, dict):
        return obj
    out = {k: v for k, v in obj.items() if k not in VIEW_COUNTERS}
    if isinstance(out.get("workflow"), dict):
        out["workflow"] = {k: v for k, v in out["workflow"].items() if k not in VIEW_COUNTERS}
    return out


def digest(body: bytes) -> str:
    """SHA-256 of the content: of a JSON answer without view counters, keys sorted (so key order and a view
    count are no change); of anything else, of its bytes."""
    try:
        data = json.loads(body)
    except (ValueError, TypeError):
        return hashlib.sha256(body).hexdigest()
    canonical = json.dumps(without_view_counters(data), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def sampled(url: str, checks: int, every: int) -> bool:
    """Whether the `checks`-th validation of `url` (from 0) is checked by a full fetch: one in `every` (0: never),
    each URL at its own turn (a hash of it), so a run's samples are spread over the URLs and not all due at
    once; none before the `every`-th validation, so a short run (and a test's request count) never pays for
    one by chance. `every` 1 checks every one."""
    if every <= 0 or checks < every - 1:
        return False
    turn = int.from_bytes(hashlib.sha256(url.encode()).digest()[:8], "big") % every
    return (checks - turn) % every == 0


def first_by_hash(keys: Iterable[str], turn: int, n: int) -> list[str]:
    """`n` of `keys` chosen by a hash that moves with `turn` (each walk's few pages to check)."""
    return sorted(keys, key=lambda k: hashlib.sha256(f"{k}\n{turn}".encode()).digest())[:n]


def endpoint_of(url: str, robots_txt: bool, walk: bool) -> str:
    """The endpoint kind a request counts under: robots.txt, a sitemap file, a walk's other pages (a
    listing), or a job's item."""
    if robots_txt:
        return ROBOTS
    path = urlsplit(url).path.lower()
    if walk and (path.endswith((".xml", ".xml.gz")) or "sitemap" in path):
        return SITEMAP
    return LISTING if walk else ITEM


@dataclasses.dataclass(frozen=True)
class Counts:
    """What a source's endpoint saw: requests, those sent with validators, 304s, 200s whose content had not
    changed although validators were sent, bytes a 304 saved, 304s checked by a full fetch, and those found
    wrong."""

    requests: int = 0
    conditional: int = 0
    not_modified: int = 0
    unchanged_200: int = 0
    bytes_saved: int = 0
    sampled: int = 0
    lied: int = 0
    state: str = UNKNOWN


def next_state(c: Counts) -> str:
    """The endpoint's verdict: unreliable once a sampled 304 proved wrong; ignored after IGNORED_AFTER
    unchanged 200s without a single 304; used once a 304 came; unknown before. Unreliable and ignored stay
    (nothing is sent that could show otherwise)."""
    if c.lied > 0:
        return UNRELIABLE
    if c.state in (IGNORED, UNRELIABLE):
        return c.state
    if c.not_modified > 0:
        return USED
    if c.unchanged_200 >= IGNORED_AFTER:
        return IGNORED
    return UNKNOWN


def sends(state: str) -> bool:
    """Whether validators are still sent at an endpoint in `state`."""
    return state in (UNKNOWN, USED)


def source_state(states: Iterable[str]) -> str:
    """A source's verdict from its endpoints': the worst news first (unreliable, then ignored), then used."""
    found = set(states)
    for state in (UNRELIABLE, USED, IGNORED):
        if state in found:
            return state
    return UNKNOWN


def summed(counts: Iterable[Counts]) -> dict[str, Any]:
    """A source's `validators` object (sources --json): its endpoints' counts added, and its state."""
    rows = list(counts)
    out: dict[str, Any] = {k: sum(getattr(c, k) for c in rows)
                           for k in ("requests", "conditional", "not_modified", "unchanged_200", "bytes_saved")}
    out["state"] = source_state(c.state for c in rows)
    return out


# --- sitemap dates -------------------------------------------------------------------------------------

def lastmod_trusted(sampled_n: int, lied: int) -> bool:
    """A source's `lastmod` is trusted once LASTMOD_TRUST_AFTER sampled pages proved it, and never after a
    page changed under an unmoved date."""
    return lied == 0 and sampled_n >= LASTMOD_TRUST_AFTER


def build_dated(lastmods: Iterable[str | None]) -> bool:
    """Whether a walk's page dates look stamped by the sitemap's build (most share one day): no trust then."""
    days = [d[:10] for d in lastmods if d]
    if len(days) < SAME_DAY_MIN:
        return False
    top = collections.Counter(days).most_common(1)[0][1]
    return top >= SAME_DAY_SHARE * len(days)
