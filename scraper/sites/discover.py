"""What `scraper discover` proposes for a site, from what it saw (pure: no requests, no clock).

A site's sitemap URLs are grouped by their shape (`shape`: the first path segment with ids and numbers
generalised, then one `*` per further segment: `/events/jazz-night-42` -> `/events/*`), a sample is spread
over the groups (`choose`), and each sampled page is described by a `Page` (its schema.org types over plain
HTTP and, when it was rendered, in the browser). `propose` turns the pages into a `Proposal`:

- `type`: the schema.org type most sampled pages carry (site furniture such as WebSite or BreadcrumbList
  aside);
- `include`: the groups where at least half the sampled pages carry a record of that type, written as
  regular expressions on the path (a prefix such as `^/events/` when every listed URL under it is such a
  group), with how many listed URLs they keep and leave out;
- `required`: the record's fields that every sampled record has;
- `fetcher`: `http` when plain HTTP gave every record, `browser` when only the browser did, `auto` when
  some pages need it and others not.

`block` writes the proposal as a commented `[[source]]` table that `scraper.base.sources` accepts as it is.
"""

import collections
import dataclasses
import re
from urllib.parse import urlsplit

from scraper.policy import fetchmode

# Types most sites put on every page: they say nothing of what a page is about.
FURNITURE = frozenset({
    "WebSite", "WebPage", "BreadcrumbList", "ListItem", "Organization", "SiteNavigationElement", "SearchAction",
    "ImageObject", "WPHeader", "WPFooter", "WPSideBar", "EntryPoint", "ReadAction", "CollectionPage",
    "ItemList", "Place", "PostalAddress", "Offer", "Person", "Thing", "ContactPoint",
})
KEEP_SHARE = 0.5            # a group is included when at least this share of its sampled pages carry a record
NOT_FIELDS = ("@", "og:")   # record keys that are not the schema.org object's own fields

_TOKENS = (("{slug}-{n}", r"[^/]+-[0-9]+"), ("{n}-{slug}", r"[0-9]+-[^/]+"), ("{id}", r"[0-9a-f-]+"),
           ("{n}", r"[0-9]+"))


def shape(url):
    """The group of a page URL: the first path segment generalised (fetchmode.pattern_of), then `/*` for
    each further segment; `/` for the home page."""
    segments = [s for s in urlsplit(url).path.split("/") if s]
    if not segments:
        return "/"
    return fetchmode.pattern_of("/" + segments[0]) + "/*" * (len(segments) - 1)


def regex_of(group):
    """A regular expression on the path that matches the URLs of `group` (a trailing slash allowed)."""
    if group == "/":
        return "^/$"
    first, *rest = group.strip("/").split("/")
    out = ""
    while first:
        for token, pattern in _TOKENS:
            if first.startswith(token):
                out += pattern
                first = first[len(token):]
                break
        else:
            out += re.escape(first[0])
            first = first[1:]
    return "^/" + out + "/[^/]+" * len(rest) + "/?$"


def first_segment(group):
    return group.strip("/").split("/")[0]


def choose(groups, n):
    """About `n` URLs spread over `groups` ({group: [url, ...]}): one from each group in turn, biggest group
    first, each group's picks spread evenly over its (sorted) URLs."""
    order = sorted(groups, key=lambda g: (-len(groups[g]), g))
    taken = dict.fromkeys(order, 0)
    chosen = []
    while len(chosen) < n and any(taken[g] < len(groups[g]) for g in order):
        for g in order:
            if len(chosen) >= n:
                break
            if taken[g] < len(groups[g]):
                taken[g] += 1
                chosen.append(g)
    picks = []
    for g in order:
        urls = sorted(groups[g])
        k = taken[g]
        if k:
            step = len(urls) / k
            picks.extend(urls[int(i * step + step / 2)] for i in range(k))
    return picks


@dataclasses.dataclass
class Page:
    """One sampled page as discover saw it."""

    url: str
    group: str
    error: str | None = None            # why it could not be read (it then counts for nothing)
    http_types: tuple = ()              # schema.org types in the HTML as served
    scripts: bool = False               # it carries scripts (other than JSON-LD)
    rendered: bool = False              # it was rendered in the browser
    browser_types: tuple = ()
    http_fields: frozenset = frozenset()      # the fields of the record of the proposed type (set by propose)
    browser_fields: frozenset = frozenset()
    render_error: str | None = None


@dataclasses.dataclass
class Group:
    name: str
    listed: int                         # sitemap URLs of this shape
    sampled: int = 0
    by_http: int = 0                    # sampled pages whose record came over plain HTTP
    by_browser: int = 0                 # ... only in the browser
    scripts_only: int = 0               # pages without a record over HTTP, with scripts, not rendered
    types: tuple = ()

    @property
    def records(self):
        return self.by_http + self.by_browser

    @property
    def checked(self):
        """Sampled pages whose verdict is known (a page with scripts that no browser rendered is not)."""
        return self.sampled - self.scripts_only

    @property
    def kept(self):
        return self.checked > 0 and self.records >= KEEP_SHARE * self.checked


@dataclasses.dataclass
class Proposal:
    site: str
    name: str
    type: str | None
    include: list
    required: list
    often: list                         # fields most records have, not all: (field, share)
    fetcher: str
    groups: list                        # Group, biggest first
    listed: int                         # sitemap URLs of the site's host
    kept: int                           # of them, the ones `include` keeps
    sampled: int
    failed: int                         # sampled pages that could not be read
    needs_browser_unchecked: int        # pages that probably need a browser none could check
    browser: bool                       # a browser was available
    rate_per_s: float
    burst: int
    requests: int = 0
    request_kinds: dict = dataclasses.field(default_factory=dict)
    sitemaps: list = dataclasses.field(default_factory=list)
    type_counts: list = dataclasses.field(default_factory=list)
    notes: list = dataclasses.field(default_factory=list)


def content_types(types):
    return [t for t in types if t not in FURNITURE]


def pick_type(pages):
    """The content type most sampled pages carry (counted once per page), with the counts; (None, [])."""
    counts = collections.Counter()
    for p in pages:
        counts.update(set(content_types(p.http_types)) | set(content_types(p.browser_types)))
    if not counts:
        return None, []
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return ranked[0][0], ranked


def record_fields(record):
    """The non-empty fields of a record's schema.org object (not @type, @id, og:*)."""
    return frozenset(k for k, v in record.items()
                     if not k.startswith(NOT_FIELDS) and v not in (None, "", [], {}))


def propose(site, name, pages, listed_urls, type_, rate_per_s, burst, browser):
    """The Proposal for `pages` (their `http_fields`/`browser_fields` set for `type_`) among `listed_urls`."""
    by_group = collections.Counter(shape(u) for u in listed_urls)
    groups = {g: Group(g, n) for g, n in by_group.items()}
    records = []
    unchecked = 0
    for p in pages:
        g = groups.setdefault(p.group, Group(p.group, 0))
        if p.error:
            continue
        g.sampled += 1
        if type_ in p.http_types and p.http_fields:
            g.by_http += 1
            records.append(p.http_fields)
        elif type_ in p.browser_types and p.browser_fields:
            g.by_browser += 1
            records.append(p.browser_fields)
        elif p.scripts and not p.rendered:
            g.scripts_only += 1
    for g in groups.values():
        types = collections.Counter()
        for p in pages:
            if p.group == g.name and not p.error:
                types.update(set(content_types(p.http_types)) | set(content_types(p.browser_types)))
        g.types = tuple(t for t, _ in types.most_common(3))
    kept_groups = [g for g in groups.values() if g.kept]
    # without a browser, a group whose pages have scripts but no record may build it in a script
    maybe = [g for g in groups.values() if not browser and not g.kept and g.scripts_only
             and g.scripts_only >= KEEP_SHARE * g.sampled and type_ is not None]
    unchecked = sum(g.scripts_only for g in maybe)
    include = include_of([g.name for g in kept_groups], by_group)
    kept = sum(1 for u in listed_urls if any(re.search(r, path_of(u)) for r in include))
    counts = collections.Counter()
    for fields in records:
        counts.update(fields)
    required = sorted((f for f, c in counts.items() if c == len(records)), key=_field_order) if records else []
    often = sorted(((f, c / len(records)) for f, c in counts.items() if 0.5 <= c / len(records) < 1),
                   key=lambda fc: (-fc[1], fc[0])) if records else []
    http_n = sum(g.by_http for g in kept_groups)
    browser_n = sum(g.by_browser for g in kept_groups)
    if browser_n and http_n:
        fetcher = "auto"
    elif browser_n:
        fetcher = "browser"
    else:
        fetcher = "http"
    return Proposal(site=site, name=name, type=type_, include=include, required=required, often=often,
                    fetcher=fetcher, groups=sorted(groups.values(), key=lambda g: (-g.listed, g.name)),
                    listed=len(listed_urls), kept=kept, sampled=sum(1 for p in pages),
                    failed=sum(1 for p in pages if p.error), needs_browser_unchecked=unchecked,
                    browser=browser, rate_per_s=rate_per_s, burst=burst,
                    notes=[g.name for g in maybe])


def _field_order(field):
    """`name` first, then dates, then the rest alphabetically: the order a reader expects."""
    low = field.lower()
    return (field != "name", "date" not in low, "start" not in low, field)


def include_of(groups, by_group):
    """The include patterns of the kept `groups`: `^/SEGMENT/` when every listed group under that first
    segment (deeper than itself) is kept, else one exact pattern per group."""
    kept = set(groups)
    out = []
    for segment in sorted({first_segment(g) for g in kept if g != "/"}):
        under = [g for g in by_group if g != "/" and first_segment(g) == segment]
        deeper = [g for g in under if "/*" in g]
        literal = not any(ch in segment for ch in "{}")
        if literal and deeper and all(g in kept for g in deeper):
            out.append(f"^/{re.escape(segment)}/")
            out.extend(regex_of(g) for g in sorted(kept) if g in under and "/*" not in g)
        else:
            out.extend(regex_of(g) for g in sorted(kept) if g in under)
    if "/" in kept:
        out.append("^/$")
    return out


def path_of(url):
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def default_name(site):
    """A source name from the site's host: `events.example.org` -> `events-example-org`."""
    host = (urlsplit(site).hostname or "site").lower()
    host = host[4:] if host.startswith("www.") else host
    return re.sub(r"[^a-z0-9]+", "-", host).strip("-") or "site"


def _toml(value):
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def block(p):
    """The proposal as a commented `[[source]]` table (TOML), ready for a sources file."""
    out = [f"# scraper discover {p.site}: {p.sampled} page(s) sampled of {p.listed} listed in the sitemaps, "
           f"over {sum(1 for g in p.groups if g.sampled)} URL shape(s); {p.requests} request(s) sent "
           f"({', '.join(f'{k} {v}' for k, v in sorted(p.request_kinds.items()))}).",
           "# What each URL shape gave (sampled: a record over plain HTTP / only in a browser / none):"]
    for g in p.groups:
        if not g.sampled and not g.listed:
            continue
        none = g.sampled - g.records - g.scripts_only
        how = (f"{g.sampled} sampled: {g.by_http} / {g.by_browser} / {none}"
               + (f" ({g.scripts_only} with scripts not rendered)" if g.scripts_only else "")
               if g.sampled else "not sampled")
        kinds = f", types {', '.join(g.types)}" if g.types else ""
        mark = "kept" if g.kept else "left out"
        out.append(f"#   {g.name:<24} {g.listed:>6} listed, {how}{kinds}: {mark}")
    if p.failed:
        out.append(f"# {p.failed} sampled page(s) could not be read (see the log).")
    out.append("[[source]]")
    out.append(f"name = {_toml(p.name)}")
    out.append('kind = "catalogue"')
    out.append('every = "1d"')
    out.append(f"rate = {float(p.rate_per_s)!r}" + ("" if p.burst == 1 else f"\nburst = {p.burst}"))
    out.append(f"site = {_toml(p.site)}")
    if p.sitemaps:
        out.append(f"# robots.txt names {_toml(p.sitemaps)}; the walk reads them by default.")
    out.append(f"# include keeps {p.kept} of the {p.listed} listed URL(s) and leaves out {p.listed - p.kept}: "
               f"the shapes where at least {KEEP_SHARE:.0%} of the pages checked carry a record of type {p.type}.")
    out.append(f"include = {_toml(p.include)}")
    if p.notes:
        extra = [regex_of(g) for g in p.notes]
        out.append(f"# {p.needs_browser_unchecked} sampled page(s) of {', '.join(p.notes)} carry scripts but no "
                   f"{p.type} in their HTML: they probably build it in a script. No browser could check; with "
                   f"Debian's chromium installed, run discover again, or add them and set fetcher = \"auto\":")
        out.append(f"# include = {_toml(p.include + extra)}")
    counted = ", ".join(f"{t} on {n}" for t, n in p.type_counts[:4])
    out.append(f"# type: the commonest schema.org type of the sampled pages ({counted}).")
    out.append(f"type = {_toml(p.type)}")
    out.append("# required: every sampled record has these; a page without one ends `incomplete`."
               + (" Most records, not all, also have " + ", ".join(f"{f} ({share:.0%})" for f, share in p.often[:8])
                  + "." if p.often else ""))
    out.append(f"required = {_toml(p.required)}")
    why = {"http": "every record came over plain HTTP.",
           "browser": "every record came only in a browser (the pages build it in a script).",
           "auto": "some pages build their record in a script: plain HTTP first, the browser where needed "
                   "(learned per URL pattern)."}
    out.append(f"# fetcher: {why[p.fetcher]}")
    out.append(f"fetcher = {_toml(p.fetcher)}")
    return "\n".join(out) + "\n"
