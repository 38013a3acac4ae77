"""The SELECT of a claim: which pending row comes next, plain or across sources by priority (issue 16).

Kept apart from `Queue.claim` (which decides which domains may be asked, in which order) so that the two
questions change separately. Each pick is a subquery giving one id; `Queue._take` runs it inside its UPDATE.
Each is written for the database it goes to (`postgres`): the two differ in more than spelling here (an
index hint, row locks, a UNION), and otherwise only in placeholders (`dialect.same`).
"""

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

# The one order of claims among the jobs a claim may take (served by the claim indexes): child jobs
# (priority 1) first, then the longest-waiting. Fairness between domains decides which domains may be
# taken from (`policy.fairness.plan`), the sources' priority which level first; this decides between jobs.
CLAIM_ORDER = "priority DESC, available_at, id"
SKIP_LOCKED = " FOR UPDATE SKIP LOCKED"    # PostgreSQL: claims side by side pass over a row being taken


def source_levels(sources: Iterable[Any]) -> list[list[str]]:
    """[[names of priority 1], [names of priority 2], ...] of `sources` (base.sources.Source), for claims."""
    levels: dict[int, list[str]] = {}
    for s in sorted(sources, key=lambda s: (s.priority, s.name)):
        levels.setdefault(s.priority, []).append(s.name)
    return list(levels.values())


# Without ANALYZE statistics SQLite prefers jobs_status and sorts every pending row (measured: 176 ms
# a claim at 1M pending); the claim index reads rows in claim order and stops at the first (56 us).
def picks(levels: Sequence[Sequence[str]] | None, where: str, args: Sequence[Any], now: float,
          postgres: bool = False) -> Iterator[tuple[str, list[Any]]]:
    """(sql, args) of the picks to try in turn: without `levels` one over every row (index jobs_claim);
    with them one per priority level, the first level first. One source's rows are read from its own
    index (jobs_claim_source) in claim order, a lookup rather than a sort; a level of several sources
    takes the best of each source's first row (children first, then the oldest).

    On PostgreSQL each pick locks its row (FOR UPDATE SKIP LOCKED, which a UNION cannot carry: a level of
    several sources is one query over `source IN (...)` there)."""
    if levels is None:
        yield (f"""SELECT id FROM jobs{"" if postgres else " INDEXED BY jobs_claim"}
                   WHERE status = 'pending' AND available_at <= ? AND {where}
                   ORDER BY {CLAIM_ORDER} LIMIT 1{SKIP_LOCKED if postgres else ""}""", [now, *args])
        return
    if postgres:
        for level in levels:
            yield (f"""SELECT id FROM jobs WHERE source IN ({','.join('?' * len(level))}) AND status = 'pending'
                       AND available_at <= ? AND {where} ORDER BY {CLAIM_ORDER} LIMIT 1{SKIP_LOCKED}""",
                   [*level, now, *args])
        return
    for level in levels:
        parts, level_args = [], []
        for name in level:
            parts.append(f"""SELECT * FROM (SELECT id, priority, available_at FROM jobs INDEXED BY jobs_claim_source
                             WHERE source = ? AND status = 'pending' AND available_at <= ? AND {where}
                             ORDER BY {CLAIM_ORDER} LIMIT 1)""")
            level_args += [name, now, *args]
        pick = parts[0] if len(parts) == 1 else \
            " UNION ALL ".join(parts) + f" ORDER BY {CLAIM_ORDER} LIMIT 1"
        yield f"SELECT id FROM ({pick})", level_args
