"""`scraper discover URL`: visit a site briefly and propose its `[[source]]` table. Stores nothing.

The visit (scraper.politeness.visit) reads robots.txt first and obeys it, sends every request (the
browser's too) at its own rate, and never more than its budget: robots.txt, at most a quarter of the budget
in sitemap files (the walk's own reader, `scraper.mirror.catalogue.read`), `sample` pages over plain HTTP
spread across the URL shapes, then, with what is left, a few pages rendered in the browser: those without
a record in their HTML that carry scripts, at most RENDER_PER_GROUP per shape, a shape given up after its
first render that finds nothing. What the pages mean is decided by scraper.sites.discover (pure)."""

import dataclasses
import logging
import re
from urllib.parse import urlsplit

from scraper.base.errors import BudgetSpent, ConfigError, FetchError, ParseError, RobotsDisallowed
from scraper.base.settings import DISCOVER_RATE_PER_S, DISCOVER_TIMEOUT_S
from scraper.base.sources import Source
from scraper.mirror import catalogue as walk
from scraper.sites import catalogue
from scraper.sites import discover as infer

log = logging.getLogger(__name__)

SAMPLE = 20                 # pages read over plain HTTP
BUDGET_PER_PAGE = 2         # the whole visit sends at most this many requests per sampled page (40 for 20)
RENDER_PER_GROUP = 3        # pages of one URL shape rendered in the browser, at most
MAX_PAGE_BYTES = 5 * 2**20  # a sampled page (decoded); bigger pages are not what a catalogue is made of
PROPOSED_RATE_PER_S = 1.0   # the rate the table proposes (robots.txt may lower it): a guest's, not a crawler's
BURST = 2                   # the burst proposed beside it


@dataclasses.dataclass
class Options:
    url: str
    name: str | None = None
    sample: int = SAMPLE
    rate_per_s: float = DISCOVER_RATE_PER_S
    user_agent: str = "scraper"
    timeout_s: float = DISCOVER_TIMEOUT_S
    browser: str | None = None          # the Chromium executable, or None: no pages are rendered


def check(url, name, sample):
    """The one sentence of what is wrong with discover's input, or None (its rate and timeout are settings,
    checked by their declarations)."""
    if not re.fullmatch(r"https?://[^\s/?#]+(/\S*)?", url or ""):
        return f"{url!r} is not an http(s) URL; give the site's address, such as https://events.example.org/"
    if name is not None and not re.fullmatch(r"[a-z0-9-]+", name):
        return f"--name {name!r} must be lower-case letters, digits and '-'"
    if sample < 1 or sample > 500:
        return f"--sample {sample} must be within 1..500"
    return None


def discover(o, render=None, clock=None):
    """The Proposal for the site at `o.url`. `render(url, gate) -> html` renders a page in a browser (None:
    no browser). ConfigError for what the user can fix, FetchError/ParseError when the site gives nothing
    to propose from, RobotsUnavailable when its robots.txt does not answer."""
    parts = urlsplit(o.url)
    site = f"{parts.scheme}://{parts.netloc}/"
    budget = BUDGET_PER_PAGE * o.sample
    from scraper.politeness import client
    with client.visit(site, o.user_agent, o.rate_per_s, budget, MAX_PAGE_BYTES, o.timeout_s, clock) as visit:
        return _discover(o, visit, site, render)


def _discover(o, visit, site, render):
    source = Source(name="discover", kind="catalogue", options=(("site", site),))
    own = [u for u in visit.sitemaps if urlsplit(u).netloc == urlsplit(site).netloc]
    sitemap_urls = walk.sitemap_urls(source, own)
    host_only = walk.wanted(source)

    def get_sitemap(url):
        try:
            return visit.get(url, kind="sitemap", max_bytes=walk.sitemaps.MAX_XML_BYTES)
        except (BudgetSpent, RobotsDisallowed) as e:    # the walk's reader knows FetchError: not read
            raise FetchError("budget" if isinstance(e, BudgetSpent) else "robots", str(e), url) from None

    found, _, _, errors = walk.read(get_sitemap, sitemap_urls, host_only, max_sitemaps=max(2, visit.budget // 4))
    for e in errors:
        log.warning("discover: %s", e)
    listed = [url for url, _ in found.values()]
    allowed = [u for u in listed if visit.allowed(u)]
    if not listed:
        raise ConfigError(f"no page URL found in the sitemaps of {site} ({', '.join(sitemap_urls)}"
                          f"{': ' + errors[0] if errors else ''}); a catalogue source needs a sitemap.")
    if not allowed:
        raise ConfigError(f"robots.txt of {site} disallows every one of the {len(listed)} URL(s) its sitemaps "
                          f"list for user-agent {visit.token!r}; there is nothing we may mirror.")
    groups = {}
    for u in allowed:
        groups.setdefault(infer.shape(u), []).append(u)
    picks = infer.choose(groups, min(o.sample, visit.left() - 1))
    log.info("discover: %d URL(s) listed (%d allowed by robots.txt) in %d shape(s); sampling %d page(s)",
             len(listed), len(allowed), len(groups), len(picks))
    pages, bodies = [], {}
    for url in picks:
        page = infer.Page(url, infer.shape(url))
        pages.append(page)
        try:
            body = visit.get(url)
        except BudgetSpent:
            page.error = "not read: the request budget was spent"
            continue
        except (FetchError, RobotsDisallowed) as e:
            page.error = str(e)
            log.info("discover: %s: %s", url, e)
            continue
        try:
            text = catalogue.decode(bytes(body))
        except ParseError as e:
            page.error = str(e)
            continue
        bodies[url] = (text, None)
        page.http_types = tuple(catalogue.types_of(url, text))
        page.scripts = catalogue.has_scripts(body)
    if render is not None:
        _render(pages, bodies, visit, render)
    type_, ranked = infer.pick_type(pages)
    if type_ is None:
        raise ConfigError(f"none of the {len(pages)} page(s) sampled on {site} carries a schema.org record "
                          f"(JSON-LD or microdata){'' if render else ', and no browser could render them'}; "
                          f"discover cannot propose a type.")
    typed = Source(name="discover", kind="catalogue", options=(("site", site), ("type", type_)))
    for page in pages:
        text, rendered = bodies.get(page.url, (None, None))
        if text is not None and type_ in page.http_types:
            page.http_fields = _fields(typed, page.url, text, type_)
        if rendered is not None and type_ in page.browser_types:
            page.browser_fields = _fields(typed, page.url, rendered, type_)
    rate = min(PROPOSED_RATE_PER_S, visit.robots_rate_per_s or PROPOSED_RATE_PER_S)
    proposal = infer.propose(site, o.name or infer.default_name(site), pages, allowed, type_, rate,
                             1 if visit.crawl_delay_s else BURST, render is not None)
    proposal.requests, proposal.request_kinds = visit.sent, dict(visit.by_kind)
    proposal.sitemaps, proposal.type_counts = own, ranked
    return proposal


def _fields(source, url, text, type_):
    try:
        record = catalogue.record_of(source, url, text)
    except ParseError:
        return frozenset()
    return infer.record_fields(record)


def _render(pages, bodies, visit, render):
    """Render, with what is left of the budget, the pages that carry scripts but no record in their HTML."""
    tried = {}
    wanted = [p for p in pages if not p.error and p.scripts and not infer.content_types(p.http_types)]
    sizes = {}
    for p in pages:
        sizes[p.group] = sizes.get(p.group, 0) + 1
    for page in sorted(wanted, key=lambda p: (-sizes[p.group], p.group)):
        done = tried.setdefault(page.group, [])
        if len(done) >= RENDER_PER_GROUP or (done and not any(done)):
            continue
        if visit.left() < 2:
            break
        try:
            html = render(page.url, visit.gate)
        except BudgetSpent:
            page.render_error = "the request budget was spent"
            break
        except (FetchError, RobotsDisallowed) as e:
            page.render_error = str(e)
            log.info("discover: rendering %s: %s", page.url, e)
            if getattr(e, "kind", None) == "internal":      # the browser itself did not start: no more renders
                break
            continue
        page.rendered = True
        page.browser_types = tuple(catalogue.types_of(page.url, html))
        done.append(bool(infer.content_types(page.browser_types)))
        bodies[page.url] = (bodies[page.url][0], html)


def open_browser(executable, user_agent, timeout_s):
    """`render(url, gate) -> html` over a browser of the visit's own (the polite client's), and its closer."""
    from scraper.politeness import client
    page, close = client.visit_browser(executable, user_agent, timeout_s, MAX_PAGE_BYTES)

    def render(url, gate):
        status, html = page(url, gate)
        if not 200 <= status < 300:
            raise FetchError("http_4xx" if status < 500 else "http_5xx", f"HTTP {status} in the browser", url,
                             status)
        return html
    return render, close

