"""What `scraper stats` reports about the stored templates: node types, categories, authors, creation
months, quality scores, videos and transcript coverage, as the data layer reads them (`db/stats`)."""

from scraper.db import stats as figures

QUALITY_BIN = 10          # quality scores (0-100) are shown in bins of ten; the last one holds 90-100
TEXT_TOP = 15             # rows of each ranking that the text shows (--json gives them all)


def report(conn):
    """The statistics as one dict (the `stats --json` object)."""
    c = figures.counts(conn)
    return {
        "templates": c["templates"],
        "node_types": _ranking(figures.ranking(conn, "node_types"), "type"),
        "categories": _ranking(figures.ranking(conn, "categories"), "category"),
        "authors": _ranking(figures.authors(conn), "author"),
        "created_per_month": [{"month": m, "templates": n} for m, n in figures.per_month(conn)],
        "created_unknown": c["created_unknown"],
        "quality_score": _quality(conn),
        "videos": {"templates_with_videos": c["templates_with_videos"], "videos": c["videos"]},
        "transcripts": transcript_coverage(conn),
        # issue 28: paid templates (from the listing; unknown until a walk lists them) and hollow answers
        "paid": c["paid"],
        "paid_unknown": c["paid_unknown"],
        "hollow": c["hollow"],
    }


def _ranking(pairs, key):
    return [{key: value, "templates": n} for value, n in pairs]


def top(conn, column, name, limit, live_only=False):
    """[{name: value, templates: n}]: the `limit` values of a JSON-list column (node_types, categories)
    used by the most templates (`live_only`: of those not removed)."""
    return _ranking(figures.ranking(conn, column, limit, live_only), name)


def _quality(conn):
    top = 100 // QUALITY_BIN - 1
    row, counts = figures.quality(conn, QUALITY_BIN, top)
    histogram = [{"from": b * QUALITY_BIN, "to": 100 if b == top else b * QUALITY_BIN + QUALITY_BIN - 1,
                  "templates": counts.get(b, 0)} for b in range(top + 1)]
    return {"scored": row[0], "min": row[1], "max": row[2],
            "mean": None if row[3] is None else round(row[3], 1), "histogram": histogram}


def transcript_coverage(conn):
    """How many linked videos and templates have a transcript; None while the transcripts tables
    (`transcripts`, `template_videos`) do not exist in this database."""
    return figures.transcript_coverage(conn)


def sources(conn):
    """{source: {"live", "removed", "fields": [{"field", "items"}]}}: each catalogue source's items and how
    many live records carry each field (og:* tags included), most common first."""
    from scraper.db import sources_report
    return {name: {**counts, "fields": [{"field": f, "items": n} for f, n in sources_report.field_coverage(conn, name)]}
            for name, counts in sources_report.items_by_source(conn).items()}


def render_sources(found, top=TEXT_TOP):
    """The lines of the catalogue sources' part of `scraper stats`."""
    lines = []
    for name, c in found.items():
        lines.append(f"source {name}: {c['live']} live item(s), {c['removed']} removed")
        lines.append(f"  fields ({len(c['fields'])}; live records carrying each, most first)")
        width = max([len(f["field"]) for f in c["fields"][:top]], default=0)
        lines.extend(f"    {f['field']:<{width}}  {f['items']}" for f in c["fields"][:top])
        if len(c["fields"]) > top:
            lines.append(f"    ... {len(c['fields']) - top} more (--json gives all)")
    return "\n".join(lines)


def render(r, top=TEXT_TOP, n8n=True):
    """The statistics as the lines `scraper stats` prints (`n8n` False: only the catalogue sources)."""
    if not n8n:
        return render_sources(r.get("sources") or {}, top) or "no template and no item stored yet"
    lines = [f"templates {r['templates']}"]
    if "paid" in r:
        lines.append(f"paid {r['paid']} (not listed yet: {r['paid_unknown']}), hollow answers {r['hollow']}")

    def ranking(title, items, key):
        lines.append(f"\n{title} ({len(items)}; templates using each, most first)")
        width = max([len(str(i[key])) for i in items[:top]], default=0)
        lines.extend(f"  {str(i[key]):<{width}}  {i['templates']}" for i in items[:top])
        if len(items) > top:
            lines.append(f"  ... {len(items) - top} more (--json gives all)")

    ranking("node types", r["node_types"], "type")
    ranking("categories", r["categories"], "category")
    ranking("authors", r["authors"], "author")
    lines.append("\ncreated per month")
    lines.extend(f"  {m['month']}  {m['templates']}" for m in r["created_per_month"])
    if r["created_unknown"]:
        lines.append(f"  unknown  {r['created_unknown']}")
    q = r["quality_score"]
    lines.append(f"\nquality score (0-100): mean {q['mean']}, min {q['min']}, max {q['max']}")
    lines.extend(f"  {b['from']:>3}-{b['to']:<3}  {b['templates']}" for b in q["histogram"])
    v = r["videos"]
    lines.append(f"\nvideos {v['videos']} in {v['templates_with_videos']} template(s)")
    t = r["transcripts"]
    if t is None:
        lines.append("transcripts: not collected in this database")
    else:
        lines.append(f"transcripts: {t['videos_with_transcript']} of {t['videos']} video(s); "
                     f"{t['templates_with_transcript']} of {t['templates_with_videos']} template(s) with videos")
    if r.get("sources"):
        lines.append("\n" + render_sources(r["sources"], top))
    return "\n".join(lines)
