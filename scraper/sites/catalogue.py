"""The `catalogue` kind: any site with a sitemap. A page becomes a record (pure: no SQL, no requests
but the worker's polite GET): the page's JSON-LD (the first object of the source's `type`, @graph
included), else its microdata item of that type; its OpenGraph tags as `og:*`; then the source's
`fields` (`css:SELECTOR` with parsel, `::text` / `::attr(x)`; `jsonld:dotted.path`). A record without
one of the source's `required` fields, or with under 70 % of the wanted ones (required plus `fields`), is
refused (`incomplete`, final, naming the missing fields). The page comes by the source's `fetcher`: plain
HTTP, the worker's browser, or `auto` (scraper/sites/adaptive.py, learned per URL pattern). The sitemaps
are read by scraper/sites/sitemaps.py and walked by scraper/mirror/catalogue.py.
"""

import json
import re
from urllib.parse import urlsplit

from scraper.base.errors import JobInvalid, ParseError
from scraper.base.urls import domain_of
from scraper.policy import fetchmode, retry
from scraper.sites import Result, Site, adaptive, unstorable

SITE = "catalogue"
PAGE = "page"                 # the kind of raw answer an item keeps
FETCHERS = fetchmode.MODES
MAX_RECORD_CHARS = 1_000_000  # a record is a page's facts, not the page: bigger is a hostile page
SYNTAXES = ["json-ld", "opengraph", "microdata"]
MISSING = "missing"           # the record's list of the source's `fields` the page did not give


class Incomplete(ParseError):
    """The page lacks a required field: final (the same page would come again)."""

    kind = retry.INCOMPLETE
    result: Result | None = None    # what to store with the failure (the fetches of `auto` it counts)


def job_key(source_name: str, path: str) -> str:
    """Queue key of one page: `SOURCE:PATH` (the path with its query, as the sitemap lists it)."""
    return f"{source_name}:{path}"


def path_of(url: str) -> str:
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def split_key(key: str) -> tuple[str, str]:
    """(source name, path) of a job key; ParseError for another key."""
    source, sep, path = key.partition(":")
    if not sep or not path.startswith("/"):
        raise ParseError(f"{key!r} is not a catalogue job key (SOURCE:/path)")
    return source, path


def source_of(settings, name):
    """The catalogue Source named `name`, or None."""
    for source in getattr(settings, "sources", ()):
        if source.name == name and source.kind == SITE:
            return source
    return None


def check_options(source) -> str | None:
    """What is wrong with a catalogue source's own keys (one sentence, for the sources file's
    validation), or None."""
    if not source.opt("site"):
        return "needs `site`, its home URL"
    fields = dict(source.opt("fields") or {})
    for name, spec in fields.items():
        if not isinstance(spec, str) or not spec.startswith(("css:", "jsonld:")):
            return f"field {name!r} must be \"css:SELECTOR\" or \"jsonld:dotted.path\""
    if (source.opt("fetcher") or fetchmode.HTTP) not in FETCHERS:
        return f"fetcher must be one of {', '.join(FETCHERS)}"
    return None


# --- a page to a record (pure) ----------------------------------------------------------------

def decode(body: bytes) -> str:
    """The page's text: its declared or sniffed encoding (w3lib, as parsel does); ParseError when it is
    not an HTML page at all."""
    from w3lib.encoding import html_to_unicode
    if b"\x00" in body[:4096]:
        raise ParseError("the page is binary (NUL bytes), not HTML")
    _, text = html_to_unicode(None, body)
    return text


def extract(source, url: str, body: bytes | str) -> dict:
    """The record of one page for `source`; ParseError (Incomplete when it lacks a required field or most
    of the wanted ones)."""
    record = record_of(source, url, body)
    complete(source, record)
    return record


def wanted(source) -> list[str]:
    """The fields a page should give: the required ones, then the source's `fields`."""
    return list(dict.fromkeys([*(source.opt("required") or ()), *sorted(dict(source.opt("fields") or {}))]))


def found(source, record) -> set[str]:
    """The wanted fields `record` has."""
    return {f for f in wanted(source) if not _empty(record.get(f))}


def complete(source, record) -> None:
    """Incomplete, naming the missing fields, when `record` lacks a required field or has under
    fetchmode.MIN_FOUND of the wanted ones."""
    missing = [f for f in source.opt("required") or () if _empty(record.get(f))]
    if missing:
        raise Incomplete(f"the page lacks the required field(s) {', '.join(missing)}")
    want = wanted(source)
    got = found(source, record)
    if want and len(got) < fetchmode.MIN_FOUND * len(want):
        lacking = [f for f in want if f not in got]
        raise Incomplete(f"the page has {len(got)} of its {len(want)} fields (under "
                         f"{fetchmode.MIN_FOUND:.0%}); it lacks {', '.join(lacking)}")


_SCRIPT = re.compile(rb"<script(?![^>]*ld\+json)[^>]*>", re.I)
AUTO_HINT = 'fetcher = "auto"'


def has_scripts(body: bytes) -> bool:
    """Whether a page carries scripts other than JSON-LD (it may build its record in one)."""
    return bool(_SCRIPT.search(bytes(body)))


def script_hint(source_name: str) -> str:
    return (f"the page carries scripts and may build its record in one: set {AUTO_HINT} for source "
            f"{source_name} (a retry over plain HTTP gets the same page)")


def record_of(source, url: str, body: bytes | str) -> dict:
    """The record of one page (bytes as served, or the browser's text), complete or not; ParseError."""
    text = decode(body) if isinstance(body, bytes) else body
    try:
        record = _extract(source, url, text)
        size = len(json.dumps(record, ensure_ascii=False))
    except RecursionError:
        raise ParseError("the page nests its markup or JSON-LD too deeply to read") from None
    except UnicodeEncodeError as e:
        raise unstorable("page", e) from None
    if size > MAX_RECORD_CHARS:
        raise ParseError(f"the page's record is {size:,} characters (at most {MAX_RECORD_CHARS:,})")
    try:
        json.dumps(record, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as e:
        raise unstorable("page", e) from None
    return record


def _extract(source, url, text):
    import extruct
    from parsel import Selector
    wanted = source.opt("type")
    try:
        data = extruct.extract(text, base_url=url, syntaxes=SYNTAXES, uniform=True, errors="ignore")
    except (ValueError, TypeError) as e:
        raise ParseError(f"the page's structured data cannot be read ({type(e).__name__}: {e})") from None
    obj = first_of_type(data.get("json-ld") or [], wanted)
    record = {}
    if obj is not None:
        record.update({k: v for k, v in obj.items() if k != "@context"})
    else:
        item = first_of_type(data.get("microdata") or [], wanted)
        if item is not None:
            record.update({k: v for k, v in item.items() if k != "@context"})
    for og in data.get("opengraph") or []:
        for k, v in og.items():
            if k.startswith("og:"):
                record.setdefault(k, v)
    fields = dict(source.opt("fields") or {})
    if fields:
        selector = Selector(text=text)
        missing = []
        for name, spec in sorted(fields.items()):
            value = _field(selector, obj, spec)
            if not _empty(value):
                record[name] = value
            elif spec.startswith("css:"):
                # the page's own value, never the JSON-LD key of the same name in its place
                record[name] = None
                missing.append(name)
            elif _empty(record.get(name)):
                missing.append(name)
        if missing:
            record[MISSING] = missing
    return record


def types_of(url: str, text: str) -> list[str]:
    """The schema.org types of a page's JSON-LD objects (@graph included) and microdata items, each once,
    in page order, without their schema.org prefix (for `scraper discover`)."""
    import extruct
    try:
        data = extruct.extract(text, base_url=url, syntaxes=["json-ld", "microdata"], uniform=True,
                               errors="ignore")
    except (ValueError, TypeError, RecursionError):
        return []
    found: list[str] = []
    for obj in [*_flatten(data.get("json-ld") or []), *_flatten(data.get("microdata") or [])]:
        types = obj.get("@type") if isinstance(obj, dict) else None
        for t in types if isinstance(types, list) else [types]:
            if isinstance(t, str) and t:
                name = t.rsplit("/", 1)[-1]
                if name not in found:
                    found.append(name)
    return found


def first_of_type(objects, wanted):
    """The first object whose @type is `wanted` (or the first object when no type is given), looking
    inside @graph too."""
    for obj in _flatten(objects):
        if not isinstance(obj, dict):
            continue
        types = obj.get("@type")
        types = types if isinstance(types, list) else [types]
        if wanted is None or wanted in types or f"http://schema.org/{wanted}" in types \
                or f"https://schema.org/{wanted}" in types:
            return obj
    return None


def _flatten(objects):
    for obj in objects:
        if isinstance(obj, dict) and isinstance(obj.get("@graph"), list):
            yield from obj["@graph"]
        if isinstance(obj, dict) and obj.get("@type") is not None:
            yield obj


def _field(selector, obj, spec):
    how, _, what = spec.partition(":")
    if how == "css":
        try:
            found = selector.css(what).get()
        except Exception as e:      # cssselect's SelectorError and friends: the source's selector is wrong
            raise ParseError(f"css selector {what!r} cannot be used ({e})") from None
        return None if found is None else " ".join(found.split())
    value = obj
    for part in what.split("."):
        if isinstance(value, list):
            value = value[int(part)] if part.isdigit() and int(part) < len(value) else None
        elif isinstance(value, dict):
            value = value.get(part)
        else:
            return None
    return value


def _empty(value):
    return value is None or value == "" or value == [] or value == {}


# --- the site seam (see scraper/sites/__init__.py) ------------------------------------------------

class _Fetcher:
    def __init__(self, settings):
        self.s = settings

    def fetch(self, job, ctx):
        name, path = split_key(job.key)
        source = source_of(self.s, getattr(job, "source", None) or name)
        if source is None:
            raise JobInvalid("unknown_source", f"no catalogue source {name!r} in the sources file")
        fetched_at = ctx.fetched_at()
        mode = source.opt("fetcher") or fetchmode.HTTP
        if mode == fetchmode.HTTP:
            body = ctx.get(job.url)
            try:
                record = extract(source, job.url, body)
            except Incomplete as e:
                if has_scripts(body):       # the likely cause, where the operator reads the failure
                    raise Incomplete(f"{e}; {script_hint(source.name)}") from None
                raise
            learned = ()
        else:
            body, record, learned = self._adaptive(source, mode, job, ctx)
        volatile = tuple(source.opt("volatile") or ())
        return Result(items=((source.name, path, job.url, record, {PAGE: body}, fetched_at, volatile),),
                      learned=learned)

    def _adaptive(self, source, mode, job, ctx):
        """(raw page, record, learned) by the browser or `auto`; Incomplete only once every path it took
        lacked the fields (the better page decides)."""
        allow = tuple(domain_of(f"http://{d}/") for d in source.opt("allow_domains") or ())
        settle = source.opt("settle")
        records: dict[int, dict] = {}      # a page is parsed once: by id of the text found() read

        def fields_of(html):
            rec = records[id(html)] = record_of(source, job.url, html)
            return found(source, rec)

        pattern = fetchmode.pattern_of(job.url)
        verdict = ctx.verdict(pattern) if mode == "auto" else None
        page = adaptive.fetch(mode, job.url, verdict, get_http=ctx.get,
                              render=lambda u: ctx.render(u, allow_domains=allow, settle=settle)[1],
                              found=fields_of, required=tuple(source.opt("required") or ()),
                              fields=tuple(dict(source.opt("fields") or {})), browser_ready=ctx.browser_ready)
        record = records.get(id(page.html))
        if record is None:
            record = record_of(source, job.url, page.html)
        learned = ((source.name, pattern, page.learned, page.by_http, page.by_browser),) if page.learned else ()
        try:
            complete(source, record)
        except Incomplete as e:
            e.result = Result(learned=learned)     # the pages it took still count (written with the failure)
            raise
        body = page.html if isinstance(page.html, bytes) else page.html.encode("utf-8")
        return body, record, learned

    def close(self):
        pass


class _Site:
    name = SITE

    def domain(self, settings):
        """The first catalogue source's domain (each job carries its own in `jobs.domain`)."""
        found = self.domains(settings)
        return found[0] if found else ""

    def requests_per_job(self, settings):
        return 1            # one page (a page rendered in a browser is counted by its requests' slots)

    def domains(self, settings):
        return sorted({domain_of(s.opt("site")) for s in getattr(settings, "sources", ())
                       if s.kind == SITE and s.enabled and s.opt("site")})

    def job_row(self, settings, value):
        """`value`: (source name, page URL); the row names its source (the job belongs to it)."""
        name, url = value
        return job_key(name, path_of(url)), SITE, url, domain_of(url), name

    def open(self, settings):
        return _Fetcher(settings)

    def gone(self, job):
        """A page that answers 404/410 is a removed item; its record and versions stay."""
        return Result(removed_items=(split_key(job.key),))


site: Site = _Site()       # mypy checks that it follows the seam
