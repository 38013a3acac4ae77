"""What `scraper stats` reports about the stored templates: node types, categories, authors, creation
months, quality scores, videos and transcript coverage. Read-only queries over `workflows`."""

from scraper.db import jsonsql, schema
from scraper.db.store import is_postgres

QUALITY_BIN = 10          # quality scores (0-100) are shown in bins of ten; the last one holds 90-100
TEXT_TOP = 15             # rows of each ranking that the text shows (--json gives them all)


def report(conn):
    """The statistics as one dict (the `stats --json` object)."""
    def one(sql):
        return conn.execute(sql).fetchone()[0]

    def ranking(sql, key):
        return [{key: r[0], "templates": r[1]} for r in conn.execute(sql)]

    return {
        "templates": one("SELECT COUNT(*) FROM workflows"),
        # COUNT(DISTINCT id): a template counts once per type, however many nodes of it it has
        "node_types": ranking(_each(conn, "node_types", "type"), "type"),
        "categories": ranking(_each(conn, "categories", "category"), "category"),
        "authors": ranking("""SELECT author, COUNT(*) AS n FROM workflows WHERE author IS NOT NULL
                              GROUP BY author ORDER BY n DESC, author""", "author"),
        "created_per_month": [
            {"month": r[0], "templates": r[1]} for r in conn.execute(
                """SELECT substr(created_at, 1, 7) AS month, COUNT(*) FROM workflows
                   WHERE created_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]*' GROUP BY month ORDER BY month""")
        ],
        "created_unknown": one("""SELECT COUNT(*) FROM workflows WHERE created_at IS NULL
                                  OR created_at NOT GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]*'"""),
        "quality_score": _quality(conn),
        "videos": {
            "templates_with_videos": one(f"""SELECT COUNT(*) FROM workflows
                                             WHERE {jsonsql.list_length(is_postgres(conn), 'videos')} > 0"""),
            "videos": one("""SELECT COUNT(DISTINCT j.value) FROM workflows w, {}
                             WHERE {}""".format(*jsonsql.list_strings(is_postgres(conn), "w.videos"))),
        },
        "transcripts": transcript_coverage(conn),
        # issue 28: paid templates (from the listing; unknown until a walk lists them) and hollow answers
        "paid": one("SELECT COUNT(*) FROM workflows WHERE paid = 1"),
        "paid_unknown": one("SELECT COUNT(*) FROM workflows WHERE paid IS NULL"),
        "hollow": one("SELECT COUNT(*) FROM workflows WHERE hollow = 1"),
    }


def _each(conn, column, name, live_only=False):
    """Templates per element of a JSON-list column, most used first, ties by name."""
    live = " AND w.removed_at IS NULL" if live_only else ""
    each, where = jsonsql.list_strings(is_postgres(conn), f"w.{column}")
    return f"""SELECT j.value AS {name}, COUNT(DISTINCT w.id) AS n
               FROM workflows w, {each}
               WHERE {where}{live}
               GROUP BY j.value ORDER BY n DESC, j.value"""


def top(conn, column, name, limit, live_only=False):
    """[{name: value, templates: n}]: the `limit` values of a JSON-list column (node_types, categories)
    used by the most templates (`live_only`: of those not removed)."""
    return [{name: r[0], "templates": r[1]}
            for r in conn.execute(_each(conn, column, name, live_only) + " LIMIT ?", (limit,))]


def _quality(conn):
    row = conn.execute("""SELECT COUNT(quality_score), MIN(quality_score), MAX(quality_score), AVG(quality_score)
                          FROM workflows""").fetchone()
    counts = dict(conn.execute(f"""SELECT MIN(quality_score / {QUALITY_BIN}, {100 // QUALITY_BIN - 1}) AS bin,
                                          COUNT(*) FROM workflows WHERE quality_score IS NOT NULL GROUP BY bin"""))
    top = 100 // QUALITY_BIN - 1
    histogram = [{"from": b * QUALITY_BIN, "to": 100 if b == top else b * QUALITY_BIN + QUALITY_BIN - 1,
                  "templates": counts.get(b, 0)} for b in range(top + 1)]
    return {"scored": row[0], "min": row[1], "max": row[2],
            "mean": None if row[3] is None else round(row[3], 1), "histogram": histogram}


def transcript_coverage(conn):
    """How many linked videos and templates have a transcript; None while the transcripts tables
    (`transcripts`, `template_videos`) do not exist in this database."""
    if not {"transcripts", "template_videos"} <= schema.tables(conn):
        return None
    def one(sql):
        return conn.execute(sql).fetchone()[0]

    return {
        "videos": one("SELECT COUNT(DISTINCT video_id) FROM template_videos"),
        "videos_with_transcript": one("""SELECT COUNT(DISTINCT tv.video_id) FROM template_videos tv
                                         JOIN transcripts t ON t.video_id = tv.video_id"""),
        "templates_with_videos": one("SELECT COUNT(DISTINCT template_id) FROM template_videos"),
        "templates_with_transcript": one("""SELECT COUNT(DISTINCT tv.template_id) FROM template_videos tv
                                            JOIN transcripts t ON t.video_id = tv.video_id"""),
    }


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
