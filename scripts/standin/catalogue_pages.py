"""The events catalogue's answers: event pages, script-rendered (/live/) pages, other pages, sitemaps.

Every function returns bytes; ``site_url`` (``http://127.0.0.2:PORT``) makes the links absolute.
"""

import gzip
import html
import json

from .catalogue_data import PAGES_LASTMOD, SITE_NAME, TAGS, page_paths, w3c

SITEMAP_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
CHILD_SITEMAPS = ("events-1", "events-2", "pages")

# The /live/ page's script: fetch the event's JSON, then build the JSON-LD element and the DOM.
# ("application/" + "ld+json" keeps the raw HTML free of that string: only the rendered page has it.)
LIVE_SCRIPT = """
(function () {
  var app = document.getElementById("app");
  fetch("/api/live/__ID__.json", {headers: {"Accept": "application/json"}})
    .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.json(); })
    .then(function (ev) {
      var data = {"@context": "https://schema.org", "@type": "Event", "name": ev.title,
        "startDate": ev.starts_at, "endDate": ev.ends_at,
        "eventStatus": "https://schema.org/EventScheduled",
        "location": {"@type": "Place", "name": ev.venue.name, "address": ev.venue.address},
        "offers": {"@type": "Offer", "price": ev.price.amount, "priceCurrency": ev.price.currency,
                   "url": ev.url},
        "description": ev.summary, "url": ev.url};
      if (ev.organizer_in_schema) { data.organizer = {"@type": "Organization", "name": ev.organizer}; }
      var ld = document.createElement("script");
      ld.type = "application/" + "ld+json";
      ld.textContent = JSON.stringify(data);
      document.head.appendChild(ld);
      document.title = ev.title + " | __SITE__";
      var article = document.createElement("article");
      article.className = "event";
      var parts = [["h1", "event-name", ev.title], ["p", "date", ev.starts_at + " – " + ev.ends_at],
                   ["p", "venue", ev.venue.name + ", " + ev.venue.address], ["p", "organizer", ev.organizer],
                   ["p", "price", ev.price.amount + " " + ev.price.currency], ["div", "description", ev.summary]];
      parts.forEach(function (part) {
        var node = document.createElement(part[0]);
        node.className = part[1];
        node.textContent = part[2];
        article.appendChild(node);
      });
      app.appendChild(article);
    })
    .catch(function () { app.textContent = "This event could not be loaded."; });
})();
"""


def _e(text):
    return html.escape(str(text), quote=True)


def _page(title, body, head="", canonical=None):
    link = f'<link rel="canonical" href="{_e(canonical)}">' if canonical else ""
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title>{link}{head}</head><body>"
            f'<header><a href="/">{SITE_NAME}</a> · <a href="/about">About</a> · <a href="/contact">Contact</a>'
            f"</header><main>{body}</main><footer>© {SITE_NAME}</footer></body></html>").encode()


def _script_json(obj):
    """JSON safe inside <script> (no ``</`` can end the element)."""
    return json.dumps(obj, ensure_ascii=False, indent=1).replace("</", "<\\/")


def event_page(event, site_url):
    """A static event page: JSON-LD, OpenGraph, and the same facts in the HTML (the organizer always)."""
    url = site_url + event.path
    meta = [("og:type", "website"), ("og:site_name", SITE_NAME), ("og:title", event.name),
            ("og:description", event.description), ("og:url", url), ("og:locale", "en_GB")]
    head = (f'<meta name="description" content="{_e(event.description)}">'
            + "".join(f'<meta property="{k}" content="{_e(v)}">' for k, v in meta)
            + f'<script type="application/ld+json">{_script_json(event.jsonld(site_url))}</script>')
    tags = "".join(f'<li><a href="/tags/{t}">{t}</a></li>' for t in event.tags)
    body = (f'<article class="event"><h1 class="event-name">{_e(event.name)}</h1>'
            f'<p class="date"><time datetime="{w3c(event.start)}">{event.start:%A %d %B %Y, %H:%M}</time>'
            f' – <time datetime="{w3c(event.end)}">{event.end:%H:%M}</time></p>'
            f'<p class="venue">{_e(event.venue)}, {_e(event.address)}</p>'
            f'<p class="organizer">{_e(event.organizer)}</p>'
            f'<p class="price">{event.price_text} EUR</p>'
            f'<div class="description"><p>{_e(event.description)}</p></div>'
            f'<ul class="tags">{tags}</ul></article>')
    return _page(f"{event.name} | {SITE_NAME}", body, head, canonical=url)


def live_page(event, site_url):
    """A script-rendered page: an empty #app and the script that fills it (no JSON-LD in the raw HTML)."""
    script = LIVE_SCRIPT.replace("__ID__", str(event.id)).replace("__SITE__", SITE_NAME)
    head = f'<meta property="og:site_name" content="{SITE_NAME}">'
    return _page(SITE_NAME, f'<div id="app"></div><script>{script}</script>', head,
                 canonical=site_url + event.path)


def live_json(event, site_url):
    return json.dumps(event.live_json(site_url), ensure_ascii=False).encode()


def _links(events):
    return "".join(f'<li><a href="{e.path}">{_e(e.name)}</a></li>' for e in events)


def home_page(events):
    return _page(SITE_NAME, f'<h1>What is on</h1><ul class="events">{_links(events[:12])}</ul>')


def tag_page(tag, events):
    chosen = [e for e in events if tag in e.tags]
    return _page(f"#{tag} | {SITE_NAME}", f'<h1>Events tagged {_e(tag)}</h1><ul class="events">{_links(chosen)}</ul>')


def about_page():
    return _page(f"About | {SITE_NAME}", "<h1>About</h1><p>A calendar of the city's concerts, readings, "
                 "markets and walks, kept by volunteers.</p>")


def contact_page():
    return _page(f"Contact | {SITE_NAME}", '<h1>Contact</h1><p>Write to <a href="mailto:hello@example.org">'
                 "hello@example.org</a>.</p>")


def other_page(path, events):
    """The page of a non-event path, or None if there is none."""
    if path == "/":
        return home_page(events)
    if path == "/about":
        return about_page()
    if path == "/contact":
        return contact_page()
    if path.startswith("/tags/") and path[len("/tags/"):] in TAGS:
        return tag_page(path[len("/tags/"):], events)
    return None


def sitemap_index(site_url, lastmods):
    """``/sitemap.xml``: the index of the gzipped child sitemaps; ``lastmods`` maps child name -> datetime."""
    items = "".join(f"<sitemap><loc>{site_url}/sitemaps/{name}.xml.gz</loc><lastmod>{w3c(lastmods[name])}"
                    f"</lastmod></sitemap>" for name in CHILD_SITEMAPS)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex xmlns="{SITEMAP_NS}">{items}'
            f"</sitemapindex>\n").encode()


def urlset(entries):
    """A gzipped ``<urlset>`` of (absolute URL, lastmod datetime) (gzip mtime 0: the same bytes each time)."""
    items = "".join(f"<url><loc>{_e(url)}</loc><lastmod>{w3c(lastmod)}</lastmod></url>" for url, lastmod in entries)
    xml = f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="{SITEMAP_NS}">{items}</urlset>\n'
    return gzip.compress(xml.encode(), mtime=0)


def pages_entries(site_url):
    return [(site_url + path, PAGES_LASTMOD) for path in page_paths()]


NOT_FOUND = _page(f"Not found | {SITE_NAME}", "<h1>Not found</h1><p>This page does not exist (any more).</p>")
