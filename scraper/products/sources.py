"""What `scraper sources` shows: each source of the file, its domains and rates, its walks and cadence,
its jobs by status, its items (live, removed) and what its fetcher did (plain HTTP, the browser)."""

import dataclasses

from scraper.base.settings import YOUTUBE_BURST, YOUTUBE_DOMAIN, YOUTUBE_RATE_PER_S
from scraper.db import fetchlearn, items, schema, sources_report, templates, validators
from scraper.db import walklog as walks
from scraper.db.store import JOB_STATUSES
from scraper.policy import revalidate


def report(conn, settings, now):
    """One dict per source of the file, in the file's order (the `sources --json` list)."""
    last = walks.last_walks(conn)
    jobs = sources_report.jobs_by_source(conn)
    fetch = fetchlearn.summary(conn)
    checked, trust = revalidation(conn)
    out = []
    for src in settings.sources:
        last_walk = last.get(src.name, (None, None))[0]
        out.append({
            "name": src.name,
            "kind": src.kind,
            "enabled": src.enabled,
            "priority": src.priority,
            "every": src.every,
            "domains": [_domain(settings, src, d) for d in settings.source_domains(src)],
            "last_walk_at": None if last_walk is None else walks.iso(last_walk),
            "next_due_at": walks.iso(walks.next_due(conn, src, now, last)) if src.enabled else None,
            "jobs": jobs.get(src.name, dict.fromkeys(JOB_STATUSES, 0)),
            "items": _items(conn, src),
            # fetcher = "auto": pages by HTTP and by browser, re-checks, verdict changes, learnt patterns
            "fetch": fetch.get(src.name, {}),
            # cheap refreshes: what validators earned, and the verdict (policy/revalidate)
            "validators": checked.get(src.name, summed(())),
        })
        if src.kind == "catalogue":
            sampled, lied = trust.get(src.name, (0, 0))
            out[-1]["lastmod"] = {"trusted": revalidate.lastmod_trusted(sampled, lied), "sampled": sampled,
                                  "lied": lied}
    return out


def summed(endpoints):
    """A source's `validators` object: its endpoints' counts added and its verdict, each endpoint's beside."""
    out = revalidate.summed(endpoints.values() if isinstance(endpoints, dict) else endpoints)
    out["endpoints"] = ({name: dataclasses.asdict(c) for name, c in endpoints.items()}
                        if isinstance(endpoints, dict) else {})
    return out


def revalidation(conn):
    """({source: its `validators` object}, {source: (sampled, lied) of its sitemap dates}); empty on a
    database older than migration 27."""
    if not schema.has_table(conn, "revalidation"):
        return {}, {}
    return ({name: summed(endpoints) for name, endpoints in validators.by_source(conn).items()},
            validators.all_lastmod_trust(conn))


def _domain(settings, src, domain):
    """The rate that applies (--domain-rate, the lowest of the sources on the domain, the defaults) and
    the one this source asks for (its `rate`, else the default)."""
    rate, burst = settings.rate_for(domain)
    default = (YOUTUBE_RATE_PER_S, YOUTUBE_BURST) if domain == YOUTUBE_DOMAIN else (settings.rate_per_s, settings.burst)
    return {"domain": domain, "rate_per_s": rate, "configured_rate_per_s": src.rate or default[0], "burst": burst}


def _items(conn, src):
    """{live, removed}: the n8n source's templates; a catalogue's rows of `items` (zeros before it exists)."""
    if src.kind == "n8n":
        counts = templates.counts(conn)
        return {"live": counts["live"], "removed": counts["removed"]}
    if schema.has_table(conn, "items"):
        live, removed = items.live_and_removed(conn, src.name)
        return {"live": live, "removed": removed}
    return {"live": 0, "removed": 0}


def render(rows):
    """The sources as the lines `scraper sources` prints."""
    lines = []
    for r in rows:
        state = "enabled" if r["enabled"] else "disabled"
        j = r["jobs"]
        domains = ", ".join(f"{d['domain']} {d['rate_per_s']:g}/s burst {d['burst']}" for d in r["domains"])
        lines.append(
            f"{r['name']} ({r['kind']}, {state}, priority {r['priority']}, every {r['every']}): {domains}; "
            f"last walk {r['last_walk_at'] or 'never'}, next due {r['next_due_at'] or '-'}; jobs "
            f"{j['pending']} pending, {j['running']} running, {j['done']} done, {j['failed']} failed, "
            f"{j['invalid']} invalid; items {r['items']['live']} live, {r['items']['removed']} removed"
            + (f"; fetched {f['http']} by HTTP, {f['browser']} by browser, {f['rechecks']} re-check(s), "
               f"{f['changes']} verdict change(s)" if (f := r.get("fetch")) else "")
            + (f"; validators {v['state']}: {v['not_modified']} of {v['conditional']} conditional request(s) "
               f"answered 304, {v['unchanged_200']} unchanged 200(s), {v['bytes_saved']:,} bytes saved"
               if (v := r["validators"])["requests"] else "")
            + (f"; lastmod {'trusted' if m['trusted'] else 'not trusted'} ({m['sampled']} sampled, {m['lied']} "
               f"lied)" if (m := r.get("lastmod")) else ""))
    return "\n".join(lines)
