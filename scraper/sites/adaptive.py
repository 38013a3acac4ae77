"""One page by a source's fetcher, "http", "browser" or "auto": the orchestration of scraper.policy.fetchmode
around two ways of getting a page, for a site kind (the catalogue) to call from its `fetch`.

No SQL and no network of its own: the caller passes the pattern's verdict (read by the worker side from
scraper.db.fetchlearn), `get_http(url) -> html` (the polite, bounded GET), `render(url) -> html` (the
browser fetcher through the worker's gate) and `found(html) -> field names`. The `Page` it returns says
what to store and what to record (`fetchlearn.record`, in the job's transaction)."""

import dataclasses

from scraper.base.errors import FetchError
from scraper.policy import fetchmode as fm

TEACHES_NOTHING = ("network", "timeout", "http_5xx")   # a failed fetch is not a page that needs a browser


@dataclasses.dataclass(frozen=True)
class Page:
    html: str                       # the one result kept
    path: str                       # how it was obtained: "http" or "browser"
    fields: frozenset               # the wanted fields it has
    learned: fm.Learned | None = None   # for "auto": what the pattern learnt (None for "http" and "browser")
    by_http: bool = False
    by_browser: bool = False


def fetch(mode, url, verdict, get_http, render, found, required, fields, browser_ready=None):
    """The page by `mode`; FetchError when the path(s) it needed failed (the attempt fails as usual, and
    teaches nothing). An incomplete page is returned as it is: the site ends it `incomplete`, naming the
    missing fields. `browser_ready()`, called before a re-check sends anything, may hand the job back."""
    wanted = set(required) | set(fields)
    if mode == fm.HTTP:
        html = get_http(url)
        return Page(html, fm.HTTP, frozenset(found(html)) & wanted, by_http=True)
    if mode == fm.BROWSER:
        html = render(url)
        return Page(html, fm.BROWSER, frozenset(found(html)) & wanted, by_browser=True)
    plan = fm.plan(verdict, url)
    if plan.recheck and browser_ready is not None:
        # a re-check takes the browser too (a browser pattern's, unless plain HTTP now suffices): the browser
        # first, before anything is sent, so a worker without a browser slot hands the page to one that has
        # it rather than asking that one to close its browser after plain HTTP (measured in the `auto` test:
        # a browser launched and closed for each of a dozen re-checks, half its run)
        browser_ready()
    results, seen = {}, {}
    first = [plan.first]
    for path in first:
        try:
            html = (get_http if path == fm.HTTP else render)(url)
        except FetchError as e:
            if e.kind not in TEACHES_NOTHING or not (plan.recheck and verdict and verdict.path == fm.BROWSER):
                raise
            # a browser pattern's re-check whose plain HTTP failed: the page still comes by the browser
            seen[path] = fm.Seen(failed=True)
            first.append(fm.BROWSER)
            continue
        results[path] = html
        seen[path] = fm.seen(found(html), required, fields)
        if path == fm.HTTP and fm.BROWSER not in first and fm.then_browser(verdict, plan, seen[path]):
            first.append(fm.BROWSER)
    learned = fm.learn(verdict, plan, http=seen.get(fm.HTTP), browser=seen.get(fm.BROWSER))
    keep = learned.keep if learned.keep in results else next(iter(results))
    html = results[keep]
    return Page(html, keep, frozenset(found(html)) & wanted, learned,
                by_http=fm.HTTP in seen, by_browser=fm.BROWSER in seen)
