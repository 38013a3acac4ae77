"""Sitemaps read with bounds (pure: bytes in, entries out). Our own parser rather than a library:
the worker's polite GET already does the bounded fetching, and a parser over bytes is all that is left.

- gzip (by its magic bytes, whatever the Content-Type) is decompressed up to a size cap, so a gzip
  bomb ends with a reason (GHSA-8823-qg2x-pv9f was that bug in ultimate-sitemap-parser < 1.8.1);
- a DOCTYPE or an entity is refused (a sitemap needs neither; that shuts out entity expansion);
- elements nested deeper than MAX_DEPTH and more than `max_urls` entries end the parse with a reason;
- `lastmod` in the W3C datetime forms (a year, a date, a time with an offset) becomes ISO 8601 UTC,
  as every stored time; anything else is no lastmod.
"""

import dataclasses
import datetime
import io
import zlib
from xml.etree import ElementTree

from scraper.base.errors import ParseError

MAX_DEPTH = 8                 # urlset > url > loc is 3 deep; image/news extensions add two
MAX_URLS = 50_000             # the protocol's limit per file
MAX_XML_BYTES = 50 * 2**20    # the protocol's limit per file, decompressed
GZIP_MAGIC = b"\x1f\x8b"
INDEX, URLSET = "sitemapindex", "urlset"


@dataclasses.dataclass(frozen=True)
class Sitemap:
    kind: str                 # INDEX or URLSET
    entries: tuple            # ((loc, lastmod ISO UTC or None), ...)


def gunzip(body: bytes, max_bytes: int = MAX_XML_BYTES) -> bytes:
    """The body decompressed when it is gzip, else as it is; ParseError past `max_bytes` or when broken."""
    if not body.startswith(GZIP_MAGIC):
        return body
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(body, max_bytes + 1)
    except zlib.error as e:
        raise ParseError(f"the gzipped sitemap is damaged ({e})") from None
    if len(out) > max_bytes:
        raise ParseError(f"the gzipped sitemap decompresses to more than {max_bytes:,} bytes; refused")
    if not d.eof:
        raise ParseError("the gzipped sitemap is truncated")
    return out


def parse(body: bytes, max_urls: int = MAX_URLS, max_bytes: int = MAX_XML_BYTES) -> Sitemap:
    """A sitemap or a sitemap index from its bytes (gzip or not); ParseError when it is neither."""
    data = gunzip(body, max_bytes)
    if len(data) > max_bytes:
        raise ParseError(f"the sitemap is over {max_bytes:,} bytes; refused")
    head = data[:4096].upper()
    if b"<!DOCTYPE" in head or b"<!ENTITY" in data.upper():
        raise ParseError("the sitemap declares a DOCTYPE or entities; refused")
    kind, entries, depth, loc, lastmod = None, [], 0, None, None
    try:
        for event, elem in ElementTree.iterparse(io.BytesIO(data), events=("start", "end")):
            name = elem.tag.rpartition("}")[2]
            if event == "start":
                depth += 1
                if depth > MAX_DEPTH:
                    raise ParseError(f"the sitemap nests elements more than {MAX_DEPTH} deep")
                if depth == 1:
                    if name not in (INDEX, URLSET):
                        raise ParseError(f"not a sitemap: its root is <{name[:40]}>")
                    kind = name
                continue
            depth -= 1
            if depth == 2 and name == "loc":
                loc = (elem.text or "").strip()
            elif depth == 2 and name == "lastmod":
                lastmod = parse_lastmod(elem.text)
            elif depth == 1:
                if loc:
                    entries.append((loc, lastmod))
                    if len(entries) > max_urls:
                        raise ParseError(f"the sitemap lists more than {max_urls:,} entries")
                loc, lastmod = None, None
                elem.clear()          # keep memory flat over a big file
    except ElementTree.ParseError as e:
        raise ParseError(f"the sitemap is not well-formed XML ({e})") from None
    if kind is None:
        raise ParseError("the sitemap is empty")
    return Sitemap(kind, tuple(entries))


def parse_lastmod(text) -> str | None:
    """A W3C datetime as ISO 8601 UTC text (seconds), or None when it is not one. A date alone is its
    midnight UTC; a time without an offset is read as UTC."""
    text = (text or "").strip()
    if not text or len(text) > 40:
        return None
    try:
        if len(text) == 4 and text.isdigit():
            moment = datetime.datetime(int(text), 1, 1)
        elif len(text) == 7 and text[4] == "-":
            moment = datetime.datetime(int(text[:4]), int(text[5:]), 1)
        else:
            moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.astimezone(datetime.timezone.utc).isoformat(timespec="seconds")


MAX_ROBOTS_SITEMAPS = 100     # Sitemap: lines one robots.txt may name; more is a hostile file


def from_robots(body: bytes) -> list:
    """The http(s) URLs of a robots.txt's `Sitemap:` lines, in order, without repeats (at most
    MAX_ROBOTS_SITEMAPS). Anything else in the file is not ours to read here."""
    found = []
    for line in body.decode("utf-8", errors="replace").splitlines():
        field, _, value = line.split("#", 1)[0].partition(":")
        value = value.strip()
        if field.strip().lower() == "sitemap" and value.lower().startswith(("http://", "https://")) \
                and value not in found:
            found.append(value)
            if len(found) >= MAX_ROBOTS_SITEMAPS:
                break
    return found
