"""The catalogue kind in-process: a page to a record (JSON-LD in @graph, microdata, OpenGraph, css and
jsonld fields, required fields), the bounded sitemap parser (gzip bombs, depth, entities, lastmod), the
walk's plan and bounds with the network faked by `responses`, and `incomplete` as a final failure."""

import dataclasses
import gzip
import json
import random

import pytest
import requests

from scraper.base import settings
from scraper.base.errors import ParseError
from scraper.base.sources import Source
from scraper.db import store
from scraper.db.queue import Queue
from scraper.mirror import catalogue as walker
from scraper.mirror import items, record
from scraper.net import http
from scraper.policy import retry
from scraper.politeness import limiter
from scraper.pool import worker
from scraper.sites import catalogue, sitemaps
from tests.helpers import store_item

SITE = "http://shop.test"


def source(**options):
    base = {"site": SITE}
    base.update(options)
    return Source(name="shop", kind="catalogue", options=tuple(sorted(base.items())))


def page(jsonld=None, body="", head=""):
    ld = f'<script type="application/ld+json">{json.dumps(jsonld)}</script>' if jsonld is not None else ""
    return f"<html><head>{ld}{head}</head><body>{body}</body></html>".encode()


PRODUCT = {"@context": "https://schema.org", "@graph": [
    {"@type": "BreadcrumbList", "name": "crumbs"},
    {"@type": "Product", "name": "Lamp", "sku": "L-1", "offers": {"price": "12.50", "priceCurrency": "EUR"}}]}


def test_the_first_object_of_the_type_inside_graph_merged_with_og_and_fields():
    src = source(type="Product", required=["name", "price"],
                 fields={"price": "jsonld:offers.price", "brand": "css:span.brand::text",
                         "image": "css:img.main::attr(src)"})
    body = page(PRODUCT, '<span class="brand"> Acme\n Co </span><img class="main" src="/l.png">',
                '<meta property="og:title" content="Lamp | Shop">')
    rec = catalogue.extract(src, f"{SITE}/p/lamp", body)
    assert rec["@type"] == "Product" and rec["name"] == "Lamp" and rec["price"] == "12.50"
    assert rec["brand"] == "Acme Co" and rec["image"] == "/l.png" and rec["og:title"] == "Lamp | Shop"
    assert "@context" not in rec


def test_microdata_when_there_is_no_json_ld():
    body = page(body='<div itemscope itemtype="https://schema.org/Event"><span itemprop="name">Gig</span>'
                     '<meta itemprop="startDate" content="2026-05-01T20:00"></div>')
    rec = catalogue.extract(source(type="Event", required=["name", "startDate"]), f"{SITE}/e/1", body)
    assert rec["name"] == "Gig" and rec["startDate"] == "2026-05-01T20:00"


def test_a_page_without_a_required_field_is_incomplete_naming_the_fields():
    with pytest.raises(catalogue.Incomplete, match="startDate, price") as e:
        catalogue.extract(source(type="Product", required=["name", "startDate", "price"]), SITE + "/x", page(PRODUCT))
    assert e.value.kind == retry.INCOMPLETE
    assert retry.decide(retry.INCOMPLETE, 200, 1, 5).action == retry.FAILED


def test_hostile_pages_end_with_a_reason():
    src = source(type="Product", required=["name"])
    with pytest.raises(ParseError, match="binary"):
        catalogue.extract(src, SITE, b"\x00\x01\x02" * 100)
    deep = b"<script type=\"application/ld+json\">" + b"[" * 100_000 + b"]" * 100_000 + b"</script>"
    with pytest.raises(ParseError):
        catalogue.extract(src, SITE, deep)
    nested = b"<div>" * 50_000 + b"</div>" * 50_000
    with pytest.raises(ParseError):
        catalogue.extract(src, SITE, nested)
    # bad bytes in a page are decoded by its declared charset, never a traceback
    latin = '<meta charset="latin-1"><script type="application/ld+json">{"@type": "Product", "name": "Café"}' \
            '</script>'
    assert catalogue.extract(src, SITE, latin.encode("latin-1"))["name"] == "Café"


def urlset(*entries):
    urls = "".join(f"<url><loc>{u}</loc>{f'<lastmod>{m}</lastmod>' if m else ''}</url>" for u, m in entries)
    return f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'.encode()


def index(*locs):
    inner = "".join(f"<sitemap><loc>{u}</loc></sitemap>" for u in locs)
    return f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{inner}</sitemapindex>'.encode()


def test_sitemaps_gzip_lastmod_and_refusals():
    sm = sitemaps.parse(gzip.compress(urlset((f"{SITE}/a", "2026-01-10T08:00:00+02:00"), (f"{SITE}/b", "junk"))))
    assert sm.kind == sitemaps.URLSET
    assert sm.entries == ((f"{SITE}/a", "2026-01-10T06:00:00+00:00"), (f"{SITE}/b", None))
    bomb = gzip.compress(b"<urlset>" + b" " * (2 * 2**20) + b"</urlset>")
    with pytest.raises(ParseError, match="decompresses to more than"):
        sitemaps.parse(bomb, max_bytes=2**20)
    with pytest.raises(ParseError, match="DOCTYPE or entities"):
        sitemaps.parse(b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><urlset>&a;</urlset>')
    with pytest.raises(ParseError, match="deep"):
        sitemaps.parse(b"<urlset>" + b"<url>" * 20 + b"</url>" * 20 + b"</urlset>")
    with pytest.raises(ParseError, match="more than 2 entries"):
        sitemaps.parse(urlset(*[(f"{SITE}/{i}", None) for i in range(3)]), max_urls=2)
    with pytest.raises(ParseError, match="not a sitemap"):
        sitemaps.parse(b"<html><body>hi</body></html>")
    with pytest.raises(ParseError, match="not well-formed"):
        sitemaps.parse(b"<urlset><url>")


def test_read_follows_indexes_keeps_the_host_and_include_exclude_and_bounds_depth(net):
    net.get(f"{SITE}/sitemap.xml", body=index(f"{SITE}/s1.xml.gz", "http://elsewhere.test/s.xml", f"{SITE}/i2.xml"))
    net.get(f"{SITE}/s1.xml.gz", body=gzip.compress(urlset(
        (f"{SITE}/items/1", "2026-01-01"), (f"{SITE}/items/2/draft", None), ("http://elsewhere.test/items/3", None),
        (f"{SITE}/about", None))))
    net.get(f"{SITE}/i2.xml", body=index(f"{SITE}/i3.xml"))
    net.get(f"{SITE}/i3.xml", body=index(f"{SITE}/i4.xml"))
    net.get(f"{SITE}/i4.xml", body=index(f"{SITE}/i5.xml"))
    session = requests.Session()
    src = source(include=["^/items/"], exclude=["/draft$"])
    found, complete, n, errors = walker.read(lambda u: http.fetch(session, u, 5, 10**6),
                                             walker.sitemap_urls(src), walker.wanted(src))
    assert list(found) == ["/items/1"] and found["/items/1"][1] == "2026-01-01T00:00:00+00:00"
    assert not complete and any("nested more than 3" in e for e in errors) and n == 5
    assert walker.sitemap_urls(src, ["http://shop.test/robots-map.xml"]) == ["http://shop.test/robots-map.xml"]
    assert walker.sitemap_urls(source(sitemaps=["http://shop.test/m.xml"]), ["x"]) == ["http://shop.test/m.xml"]


def test_plan_new_changed_restored_and_missing_only_when_complete():
    listed = {"/a": ("u", "2026-02-01T00:00:00+00:00"), "/b": ("u", "2026-01-01T00:00:00+00:00"),
              "/c": ("u", None), "/d": ("u", None), "/f": ("u", "2026-03-01T00:00:00+00:00")}
    items_ = {"/a": ("2026-01-15T00:00:00+00:00", None, None), "/b": ("2026-01-15T00:00:00+00:00", None, None),
              "/d": ("2026-01-15T00:00:00+00:00", "2026-01-20T00:00:00+00:00", None),
              "/e": ("2026-01-15T00:00:00+00:00", None, None),
              "/f": ("2026-01-15T00:00:00+00:00", None, "2026-03-01T00:00:00+00:00")}
    p = walker.plan(listed, True, {"/a": None, "/b": None, "/d": None, "/e": None, "/f": None}, items_)
    assert (p.new, p.changed, p.restored, p.missing) == (["/c"], ["/a"], ["/d"], ["/e"])
    assert walker.plan(listed, False, {}, items_).missing == []


def test_an_incomplete_page_ends_failed_not_retried_and_a_gone_one_is_removed(tmp_path, net):
    src = source(type="Product", required=["name", "price"], fields={"price": "jsonld:offers.price"},
                 volatile=["views"])
    s = dataclasses.replace(settings.build(db_path=str(tmp_path / "jobs.db"), transcripts=False), sources=(src,))
    conn = store.open_db(s.db_path)
    q = Queue(conn)
    q.seed([catalogue.site.job_row(s, ("shop", f"{SITE}/p/{n}")) for n in (1, 2)], now=0)
    net.get(f"{SITE}/p/1", body=page(PRODUCT))
    net.get(f"{SITE}/p/2", body=page({"@type": "Product", "name": "No price"}))
    session = http.make_session(s.user_agent)
    w = worker.Worker(s, "w1", q, limiter.NoLimiter(), session, rng=random.Random(1))
    while w.step():
        pass
    jobs = {r["key"]: dict(r) for r in conn.execute("SELECT * FROM jobs")}
    assert jobs["shop:/p/1"]["status"] == "done"
    bad = jobs["shop:/p/2"]
    assert (bad["status"], bad["error_kind"], bad["attempts"]) == ("failed", "incomplete", 1)
    assert "price" in bad["last_error"]
    # a volatile field moving alone is no new version; a 404 marks the item removed, its data kept
    with store.transaction(conn) as c:
        rec = json.loads(c.execute("SELECT record FROM items").fetchone()[0])
        assert store_item(c, "shop", "/p/1", f"{SITE}/p/1", dict(rec, views=7), {"page": b"x"}, "2026-12-01",
                           ("views",)) == 1
    q.refetch(["shop:/p/1"], 0)
    net.replace("GET", f"{SITE}/p/1", status=404)
    while w.step():
        pass
    row = conn.execute("SELECT version, removed_at, record FROM items WHERE key = '/p/1'").fetchone()
    assert row["version"] == 1 and row["removed_at"] and json.loads(row["record"])["name"] == "Lamp"
    assert [c["change"] for c in items_changes(conn)] == ["added", "removed"]
    session.close()
    conn.close()


def items_changes(conn):
    from scraper.mirror import answers
    return [c for c in answers.changes(conn) if c.get("key", "").startswith("shop:")]


def test_record_write_keeps_a_version_per_change(tmp_path):
    conn = store.open_db(str(tmp_path / "jobs.db"))
    from scraper.sites import Result
    for name, at in (("A", "2026-01-01"), ("A", "2026-01-02"), ("B", "2026-01-03")):
        with store.transaction(conn) as c:
            record.write(c, Result(items=(("shop", "/p", f"{SITE}/p", {"name": name}, {"page": name.encode()}, at,
                                           ()),)), 0)
    assert [v["version"] for v in items.history(conn, "shop", "/p")] == [1, 2]
    assert items.find_key(conn, "shop", f"{SITE}/p") == "/p"


def test_reextract_rebuilds_items_from_their_stored_pages_sending_nothing(tmp_path):
    conn = store.open_db(str(tmp_path / "jobs.db"))
    body = page(PRODUCT, '<span class="brand">Acme</span>')
    with store.transaction(conn) as c:
        store_item(c, "shop", "/p", f"{SITE}/p", {"name": "stale"}, {"page": body}, "2026-01-01T00:00:00+00:00")
        store_item(c, "gone", "/q", f"{SITE}/q", {"name": "kept"}, {"page": body}, "2026-01-01T00:00:00+00:00")
    src = source(type="Product", fields={"brand": "css:span.brand::text"})
    assert items.reextract(conn, {"shop": src}, catalogue.extract) == (1, 1)
    rec = json.loads(conn.execute("SELECT record FROM items WHERE source = 'shop'").fetchone()[0])
    assert rec["name"] == "Lamp" and rec["brand"] == "Acme"
    assert json.loads(conn.execute("SELECT record FROM items WHERE source = 'gone'").fetchone()[0]) == {"name": "kept"}
    conn.close()


def test_check_options_names_what_is_wrong():
    assert catalogue.check_options(source()) is None
    assert "site" in catalogue.check_options(Source(name="x", kind="catalogue"))
    assert "css:SELECTOR" in catalogue.check_options(source(fields={"a": "xpath://a"}))
    assert catalogue.check_options(source(fetcher="auto")) is None
    assert "fetcher" in catalogue.check_options(source(fetcher="selenium"))


def test_the_sitemaps_of_a_robots_txt_are_its_http_sitemap_lines_once_each_and_bounded():
    from scraper.sites import sitemaps as parser
    body = (b"User-agent: *\nDisallow: /x\nSITEMAP: http://a.test/one.xml # the main one\n"
            b"sitemap:https://a.test/two.xml.gz\nSitemap: ftp://a.test/no.xml\nSitemap: http://a.test/one.xml\n"
            b"Sitemap:\n\xff\xfe garbage\n")
    assert parser.from_robots(body) == ["http://a.test/one.xml", "https://a.test/two.xml.gz"]
    many = "".join(f"Sitemap: http://a.test/{i}.xml\n" for i in range(500)).encode()
    assert len(parser.from_robots(many)) == parser.MAX_ROBOTS_SITEMAPS
