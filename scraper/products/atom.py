"""The Atom feed of changes (RFC 4287): the templates and catalogue items created, changed, removed and
restored, newest first, one source or all; served by `scraper serve` at `/changes.atom` and written by
`scraper export --format atom`.

Its entries are the outbox's `template.*` and `item.*` events (db/events.py, read by mirror/feed.py), so a
feed reader sees exactly what `scraper changes --after` and the webhooks carry. Ids are stable URNs: an
entry's is its event's UUID (an event recorded before the outbox, `change:<seq>`, gets a name-based UUID of
it), the feed's a name-based UUID of the site and the source; a reader that has seen an entry never sees it
as new again. Each entry links the template's page on the site (the `templates` view's `url`), or the
item's URL.
"""

import datetime
import re
import time
import uuid
from xml.etree import ElementTree as ET

from scraper import __version__
from scraper.base.errors import ConfigError
from scraper.db import items as item_table
from scraper.db import sources_report
from scraper.mirror import feed
from scraper.mirror.answers import N8N
from scraper.products import lookup, output

ENTRIES = 100            # a feed reader polls: the newest this many changes, as most sites' feeds keep
TYPES = ("template.*", "item.*")
CONTENT_TYPE = "application/atom+xml; charset=utf-8"
NS = "http://www.w3.org/2005/Atom"
VERBS = {"created": "New", "updated": "Changed", "removed": "Removed", "restored": "Restored"}
# what XML 1.0 cannot hold (a name is a site's text: control characters, lone surrogates); ElementTree would
# write it as it is, and a reader would refuse the whole feed
NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def check_source(conn, source):
    """ConfigError naming the sources when `source` is neither n8n's templates nor a catalogue source."""
    known = [N8N, *item_table.sources(conn)]
    if source is not None and source not in known:
        raise ConfigError(f"no source {source!r} in this mirror; its sources are {', '.join(known)}.")


def urn(name):
    """A stable URN for `name`: the UUID it is, else a name-based UUID (version 5) of it."""
    try:
        return uuid.UUID(name).urn
    except ValueError:
        return uuid.uuid5(uuid.NAMESPACE_URL, name).urn


def rfc3339(text):
    """A stored time (ISO 8601; no offset means UTC) as RFC 3339 in UTC, whole seconds."""
    at = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if at.tzinfo is None:
        at = at.replace(tzinfo=datetime.timezone.utc)
    return at.astimezone(datetime.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def build(conn, site_default, source=None, limit=ENTRIES, self_url=None, now=None):
    """The feed as UTF-8 bytes: the newest `limit` changes (of `source` only), newest first. `self_url`: the
    feed's own address, where it is served; `now`: its `updated` while it has no entry (Unix seconds)."""
    check_source(conn, source)
    site = lookup.site_url(conn, site_default)
    found = feed.newest(conn, limit, TYPES, source)
    names = sources_report.names(conn, [e["data"]["id"] for e in found if e["type"].startswith("template.")],
                                 [(e["source"], e["subject"]) for e in found if e["type"].startswith("item.")])
    root = ET.Element("feed", xmlns=NS)
    _text(root, "id", urn(f"{site}/changes.atom?source={source or ''}"))
    _text(root, "title", f"{source or 'All'} changes of the mirror of {site}")
    empty_at = datetime.datetime.fromtimestamp(time.time() if now is None else now, datetime.timezone.utc)
    _text(root, "updated", rfc3339(found[0]["occurred_at"] if found else empty_at.isoformat()))
    ET.SubElement(ET.SubElement(root, "author"), "name").text = "scraper"
    ET.SubElement(root, "generator", version=__version__).text = "scraper"
    if self_url:
        ET.SubElement(root, "link", rel="self", type="application/atom+xml", href=self_url)
    ET.SubElement(root, "link", rel="alternate", href=site)
    for e in found:
        _entry(root, e, site, names)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def _entry(root, e, site, names):
    family, _, verb = e["type"].partition(".")
    data = e["data"]
    if family == "template":
        name, link, what = names[0].get(data["id"]), lookup.page_url(site, data["id"]), f"template {data['id']}"
    else:
        name, link, what = names[1].get((e["source"], e["subject"])), data.get("url"), f"{e['source']} item"
    entry = ET.SubElement(root, "entry")
    _text(entry, "id", urn(e["id"]))
    _text(entry, "title", f"{VERBS.get(verb, verb)} {what}: {name or e['subject']}")
    _text(entry, "updated", rfc3339(e["occurred_at"]))
    if link:
        ET.SubElement(entry, "link", rel="alternate", type="text/html", href=NOT_XML.sub("", link))
    ET.SubElement(entry, "category", term=e["source"])
    version = f", version {data['version']}" if data.get("version") is not None else ""
    _text(entry, "summary", f"{e['source']} {e['subject']} {verb}{version} (event {e['seq']}).")


def _text(parent, tag, text):
    ET.SubElement(parent, tag).text = NOT_XML.sub("\ufffd", text)


def write_file(conn, path, site_default, source=None, limit=ENTRIES, now=None):
    """Write the feed to `path` through a temporary file beside it; returns how many entries it holds."""
    output.check_folder(path, "export")
    body = build(conn, site_default, source, limit, now=now)
    output.put(path, body, what="export")
    return body.count(b"<entry>")
