"""Redaction of a stored template row, and the verdict stored with it (migration 16): whether redacting
changes nothing under the current rules, and otherwise the redacted columns saved. Uses the fast path for
the workflow JSON (`fast.workflow`), the exact rules for the text columns."""

import functools
import json

from scraper.policy.redact.fast import workflow
from scraper.policy.redact.rules import COLUMNS, RULES_VERSION, text, value


def stored(r, as_text=True):
    """Redact a `workflows` row as stored (JSON columns still text) in place; returns how many values. The
    workflow is decoded and walked as JSON (`workflow()`); `as_text` keeps a redacted one JSON text (CSV,
    Parquet), else it becomes the decoded value. The export's redaction and `verdict`'s test."""
    n = 0
    for col in COLUMNS:
        v = r.get(col)
        if not isinstance(v, str):
            continue
        if col == "workflow":
            clean, k = workflow(json.loads(v))
            if k:
                r[col] = json.dumps(clean, ensure_ascii=False, separators=(",", ":")) if as_text else clean
        else:
            r[col], k = text(v)
        n += k
    return n


def verdict(r):
    """`RULES_VERSION` when redacting the `workflows` row `r` (all of COLUMNS, as stored) changes nothing,
    else None: a secret, or not known (a row without all of COLUMNS, a workflow that is not JSON)."""
    return decided(r)[0]


def decided(r):
    """(verdict, saved) of a `workflows` row, stored with it as `clean_at_rules` and `redacted`: the
    export then skips a clean row's redaction, and takes a row with secrets from `saved` (JSON text: the
    rules version, how many values, the redacted columns as `stored()` makes them) instead of walking it.
    (None, None) when not known (see `verdict`)."""
    if not all(col in r for col in COLUMNS):
        return None, None
    texts = tuple(r[col] for col in COLUMNS)
    if all(v is None or isinstance(v, (str, int, float)) for v in texts):
        return _decided(texts)
    return _decide(r)


# A pure function of the columns' texts, walked once per job: the worker decides it before the transaction
# that stores the row (`mirror.record.prepare`), so the upsert inside, under the write lock all workers
# share, finds it here. Same string objects: their hashes are cached and equality is identity.
@functools.lru_cache(maxsize=16)
def _decided(texts):
    return _decide(dict(zip(COLUMNS, texts, strict=True)))


def _decide(r):
    out = dict(r)
    try:
        n = stored(out)
    except (ValueError, RecursionError):
        return None, None
    if n == 0:
        return RULES_VERSION, None
    changed = {col: out[col] for col in COLUMNS if out[col] != r[col]}
    return None, json.dumps({"rules": RULES_VERSION, "values": n, "columns": changed}, ensure_ascii=False)


def restore(r, saved):
    """Put the redacted columns `saved` (from `decided`) into the row `r` as read, in place: how many
    values, as `stored(r)` would say; None (`r` untouched) when `saved` is not of the current rules, or `r`
    lacks one of COLUMNS (an export of chosen columns: its count is of those only)."""
    if not saved or not all(col in r for col in COLUMNS):
        return None
    try:
        data = json.loads(saved)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("rules") != RULES_VERSION:
        return None
    r.update(data["columns"])
    return data["values"]


def row(r, columns=COLUMNS):
    """(a copy of an export row with secrets redacted, how many values): the workflow JSON (a decoded
    value or JSON text is walked as JSON) and the free text columns."""
    out, n = dict(r), 0
    for col in columns:
        v = out.get(col)
        if isinstance(v, (dict, list)):
            out[col], k = value(v)
        elif isinstance(v, str):
            out[col], k = text(v)
        else:
            k = 0
        n += k
    return out, n
