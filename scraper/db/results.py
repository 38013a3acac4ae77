"""One job's result written in one pass (STYLE rule 26): `state()`, what is stored of the templates and items a
result names, read once before the mirror decides what to write (`mirror/record.py`); the `Plan` it decides, a
plain object; `write()`, which writes it inside the caller's transaction (the one that marks the job done),
each table in one statement where it can: plain rows, raw answers, templates, link tables, items, removals,
what `fetcher = "auto"` learnt, child jobs, and the changes with their events (the outbox), in that order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scraper.db import answers, fetchlearn, items, templates
from scraper.db.answers import Answer, Change
from scraper.db.backend import Conn
from scraper.db.items import Item
from scraper.db.items import State as ItemState
from scraper.db.queue import DEFAULT_SOURCE, add_jobs
from scraper.db.store import replace_links, upsert
from scraper.db.templates import State as TemplateState
from scraper.policy.fetchmode import Learned


@dataclass(frozen=True)
class State:
    """What is stored of a result's templates ({id: templates.State}) and items ({(source, key): items.State})."""

    templates: dict[int, TemplateState] = field(default_factory=dict)
    items: dict[tuple[str, str], ItemState] = field(default_factory=dict)


def state(conn: Conn, template_ids: Mapping[int, bool], item_keys: Mapping[tuple[str, str], bool],
          source: str, kind: str) -> State:
    """The `State` of the templates and items named (each mapped to whether its current version's first answer
    is wanted too: a removal's event names it); a template's `last_hash` is its newest answer of (`source`,
    `kind`)."""
    out = State()
    for tid, with_current in template_ids.items():
        t = templates.state(conn, tid, source, kind)
        if with_current and t.stored and t.version is not None:
            t = t._replace(current=answers.current(conn, source, str(tid), t.version))
        out.templates[tid] = t
    for (src, key), with_current in item_keys.items():
        i = items.state(conn, src, key)
        if with_current and i.stored and i.version is not None:
            i = i._replace(current=answers.current(conn, src, key, i.version))
        out.items[(src, key)] = i
    return out


@dataclass(frozen=True)
class Workflow:
    """A template's `workflows` row: `row` upserted, or (no row) the stored one seen again at `seen_at`."""

    id: int
    row: dict[str, Any] | None = None
    seen_at: str = ""


@dataclass(frozen=True)
class Plan:
    """What one result writes, decided by the mirror (`mirror/record.plan`)."""

    rows: tuple[tuple[str, dict[str, Any], str], ...] = ()     # (table, row, primary key): upserted
    answers: tuple[Answer, ...] = ()
    workflows: tuple[Workflow, ...] = ()
    links: tuple[tuple[str, str, Any, Sequence[dict[str, Any]]], ...] = ()    # (table, column, value, rows)
    items: tuple[Item, ...] = ()
    removed: tuple[tuple[int, str], ...] = ()                  # (template id, at) of live templates
    removed_items: tuple[tuple[str, str, str], ...] = ()       # (source, key, at) of live items
    learned: tuple[tuple[str, str, Learned, bool, bool], ...] = ()   # db/fetchlearn.record's arguments
    children: tuple[Sequence[str], ...] = ()                   # job rows, queued once
    changes: tuple[Change, ...] = ()
    now: float = 0.0
    source: str = DEFAULT_SOURCE        # of the child jobs
    priority: int = 0                   # of the child jobs


def write(conn: Conn, plan: Plan) -> None:
    """Write `plan` inside the caller's transaction."""
    for table, row, pk in plan.rows:
        upsert(conn, table, row, pk)
    if plan.answers:
        answers.put(conn, plan.answers)
    for w in plan.workflows:
        if w.row is None:
            templates.seen(conn, ((w.id, w.seen_at),))
        else:
            upsert(conn, "workflows", w.row, "id")
    for table, column, value, rows in plan.links:
        replace_links(conn, table, column, value, rows)
    if plan.items:
        items.put(conn, plan.items)
    if plan.removed:
        templates.mark_removed(conn, plan.removed)
    if plan.removed_items:
        items.mark_removed(conn, plan.removed_items)
    for src, pattern, learned, by_http, by_browser in plan.learned:
        fetchlearn.record(conn, src, pattern, learned, by_http, by_browser, plan.now)
    if plan.children:
        add_jobs(conn, plan.children, plan.now, priority=plan.priority, source=plan.source)
    if plan.changes:
        answers.add_changes(conn, plan.changes)
