"""Where a site's `Result` becomes rows, in one pass (STYLE rule 26): what is stored of the templates and
items it names is read once (`db/results.state`), what to write is decided here, pure (`plan`: what is new,
changed, removed, which version, which changes and events, by `mirror/answers` and `mirror/items`), and
`db/results.write` writes that `Plan` in the transaction that marks the job done.

Sites hold no SQL (import-linter keeps them away from `db`); they return a `Result`: plain rows, link tables,
versioned items with their raw answers, removals, what `fetcher = "auto"` learnt (fetch_patterns) and child
jobs.
"""

import dataclasses

from scraper import sites
from scraper.db import results, templates
from scraper.db.queue import DEFAULT_SOURCE, add_jobs
from scraper.db.store import transaction
from scraper.mirror import answers, items
from scraper.policy import redact

CHILD_PRIORITY = 1          # a child job completes a record already stored: it goes first when its domain can send


def prepare(result: sites.Result) -> sites.Result:
    """The Result with its costly pure parts done before the job's transaction, so that the write lock every
    worker shares is held for the SQL alone: raw answers hashed and compressed (`answers.Packed`), a template
    row's redaction verdict decided (`redact.decided` keeps it for the upsert)."""
    if not (result.versioned or result.items or result.rejected):
        return result
    for row, _raw, _at in result.versioned:
        redact.decided(row)
    return dataclasses.replace(
        result,
        versioned=tuple((row, _packed(raw), at) for row, raw, at in result.versioned),
        items=tuple((src, key, url, rec, _packed(raw, hashed=False), at, vol)
                    for src, key, url, rec, raw, at, vol in result.items),
        rejected=tuple((src, key, answers.pack(body), at) for src, key, body, at in result.rejected))


def _packed(raw, hashed=True):
    return {kind: answers.pack(body, hashed) for kind, body in raw.items()}


def write(conn, result: sites.Result, now: float, at: str = "", source: str = DEFAULT_SOURCE) -> results.Plan:
    """Write a Result inside the caller's transaction; `at` (ISO 8601) dates a removal; child jobs belong
    to `source`, the source of the job that found them. Returns the Plan written."""
    template_ids, item_keys = named(result)
    done = plan(result, results.state(conn, template_ids, item_keys, answers.N8N, answers.API), now, at, source)
    results.write(conn, done)
    return done


def named(result: sites.Result):
    """The templates and items `result` writes ({id: ...}, {(source, key): ...}), each with whether the first
    answer of its current version is wanted: a removal's event names it, and so may a hollow answer's."""
    template_ids, item_keys = {}, {}
    for row, _raw, _at in result.versioned:
        template_ids[row["id"]] = template_ids.get(row["id"], False) or bool(row.get("hollow"))
    template_ids.update(dict.fromkeys(result.removed, True))
    for src, key, *_ in result.items:
        item_keys.setdefault((src, key), False)
    item_keys.update(dict.fromkeys(result.removed_items, True))
    return template_ids, item_keys


def plan(result: sites.Result, stored: results.State, now: float, at: str, source: str) -> results.Plan:
    """What `result` writes, given what is stored (`stored`): pure. Each part sees what the earlier ones
    wrote (a template stored and removed by one result)."""
    tstate, istate = dict(stored.templates), dict(stored.items)
    written, workflows, rows, changes, removed, removed_items = [], [], [], [], [], []
    for row, raw, fetched_at in result.versioned:
        t = answers.decided(tstate[row["id"]], row, raw, fetched_at)
        tstate[row["id"]] = t.after
        written += t.answers
        workflows.append(t.workflow)
        changes += t.changes
    for src, key, url, rec, raw, fetched_at, volatile in result.items:
        i = items.decided(istate[(src, key)], src, key, url, rec, raw, fetched_at, volatile)
        istate[(src, key)] = i.after
        written += i.answers
        rows.append(i.item)
        changes += i.changes
    for tid in result.removed:
        gone = answers.removal(tstate[tid], tid, at)
        if gone is not None:
            change, tstate[tid] = gone
            removed.append((tid, at))
            changes.append(change)
    for src, key in result.removed_items:
        gone = items.removal(istate[(src, key)], src, key, at)
        if gone is not None:
            change, istate[(src, key)] = gone
            removed_items.append((src, key, at))
            changes.append(change)
    for src, key, body, fetched_at in result.rejected:
        written.append(answers.answer_row(src, key, answers.REJECTED_VERSION, answers.REJECTED,
                                          answers.content_hash(body), fetched_at, body,
                                          template_id=int(key) if key.isdigit() else None))
    return results.Plan(rows=result.rows, answers=tuple(written), workflows=tuple(workflows), links=result.links,
                        items=tuple(rows), removed=tuple(removed), removed_items=tuple(removed_items),
                        learned=result.learned, children=result.children, changes=tuple(changes), now=now,
                        source=source, priority=CHILD_PRIORITY)


def resume(conn, settings, now: float) -> int:
    """Queue the videos of templates stored while transcripts were off (or before transcripts existed);
    called before the workers start. Returns how many jobs were new."""
    from scraper.sites import youtube
    with transaction(conn) as c:
        videos = templates.videos_without_jobs(c)
        return add_jobs(c, sites.children_of(settings, youtube.SITE, videos), now, priority=CHILD_PRIORITY,
                        source=settings.n8n_source)
