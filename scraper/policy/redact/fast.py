"""The export's fast path of redaction: `workflow()` gives exactly what `redact.value()` gives (the same
values redacted; tests/test_redact_speed.py compares both over the stand-in's whole corpus), found without
a regex call per string. Pure, like `redact`."""

import bisect

from scraper.policy.redact.patterns import ANY_RE, BY_LITERAL, ODD_CASE, QUICK_RE
from scraper.policy.redact.rules import (
    PASSWORD_KEYS,
    SECRET_KEYS,
    keep_scheme,
    looks_secret,
    norm,
    secret_name,
    text,
    value,
)

# --- the export's fast path: the same values redacted, found without a regex call per string ---------------
#
# `value()` walks the whole workflow, copies it and searches every string: 6.7 times the cost of an
# unredacted export. `workflow()` gives the same result (tests/test_redact_speed.py compares both over the
# stand-in's whole corpus) in three steps:
# 1. one walk without copying collects the strings and notes the dicts the key rules could touch;
# 2. the strings `text()` could change are found at once: the quick literals are looked for in all the
#    ASCII strings joined (str.find, not a regex), then only the patterns whose literal a string holds are
#    searched (an ASCII string matches a case-insensitive pattern only where its literal is in its lower
#    case; any other string gets `text()`'s own test);
# 3. nothing found: the workflow is returned as it is; else only the containers on the way to a change
#    are copied.
_SEP = "\x00"       # between joined strings: no literal holds it, so no literal is found across two strings


def workflow(obj):
    """(the JSON value `obj` with the same secrets replaced as `value(obj)`, how many). Faster: parts with
    nothing to redact are shared with `obj`, not copied (`obj` itself is never changed)."""
    strings, keyed = [], []
    if not _collect(obj, strings, keyed):
        return value(obj)       # not plain JSON types (a subclass): the exact walk
    hot = _hot(strings)
    if not hot and not keyed:
        return obj, 0
    return _apply(obj, hot)


def _collect(obj, strings, keyed):
    """The walk of step 1: every string into `strings`, each dict a key rule might touch into `keyed`.
    False when `obj` holds something other than plain JSON types."""
    stack = [obj]
    push, add, verdicts = stack.append, strings.append, _VERDICTS
    while stack:
        o = stack.pop()
        t = type(o)
        if t is dict:
            for key, item in o.items():
                ti = type(item)
                if ti is str:
                    add(item)
                    v = verdicts.get(key)
                    if v is None:
                        v = _key_verdict(key)
                    if v:
                        keyed.append(o)
                elif ti is dict or ti is list:
                    push(item)
                    if item and key == "pinData":
                        keyed.append(o)
                elif isinstance(item, (str, dict, list)):
                    return False
                elif item and key == "pinData":
                    keyed.append(o)
            name = o.get("name")
            if name is not None and type(name) is str and _key_verdict(name) and type(o.get("value")) is str:
                keyed.append(o)
        elif t is list:
            for item in o:
                ti = type(item)
                if ti is str:
                    add(item)
                elif ti is dict or ti is list:
                    push(item)
                elif isinstance(item, (str, dict, list)):
                    return False
        elif t is str:
            add(o)
        elif isinstance(o, (str, dict, list)):
            return False
    return True


_VERDICTS = {}


def _key_verdict(name):
    """Whether `name` (a str) is a secret's name (cached: a workflow repeats the same few hundred keys)."""
    v = _VERDICTS.get(name)
    if v is None:
        v = _VERDICTS[name] = norm(name) in SECRET_KEYS
        if len(_VERDICTS) > 65_536:
            _VERDICTS.clear()
    return v


def _hot(strings):
    """The strings for which `text()` would do more than return them: step 2."""
    joined = _SEP.join(strings)
    low = joined.lower()
    if len(low) == len(joined) and not any(c in joined for c in ODD_CASE):
        return _hot_in(strings, low)
    # rare: a character whose lower case is longer, or that matches an ASCII letter in another case
    plain = [s for s in strings if s.isascii()]
    hot = {s for s in strings if not s.isascii() and QUICK_RE.search(s.lower()) is not None
           and ANY_RE.search(s) is not None}
    return hot | _hot_in(plain, _SEP.join(plain).lower())


def _hot_in(strings, low):
    """`_hot` of strings whose lower case `low` (joined by _SEP) keeps every character's position: one pass
    over `low` per literal; at each place it occurs, the branches it belongs to are tried where a match
    could start (see `matches`)."""
    hot = set()
    starts, at = [], 0
    for s in strings:
        starts.append(at)
        at += len(s) + 1
    ends = len(low)
    for lit, tries in BY_LITERAL.items():
        i = low.find(lit)
        while i >= 0:
            k = bisect.bisect_right(starts, i) - 1
            s, local = strings[k], i - starts[k]
            if s not in hot and any(local >= o and pattern.match(s, local - o) is not None for pattern, o in tries):
                hot.add(s)
                i = low.find(lit, starts[k + 1] if k + 1 < len(starts) else ends)   # this string is decided
            else:
                i = low.find(lit, i + 1)
    return hot


def _apply(obj, hot):
    """`value(obj)` with `text()` called only for the strings in `hot`; unchanged parts are shared."""
    t = type(obj)
    if t is str:
        return text(obj) if obj in hot else (obj, 0)
    if t is list:
        out, n, changed = [], 0, False
        for item in obj:
            ti = type(item)
            if (ti is str and item not in hot) or not (ti is str or ti is dict or ti is list):
                out.append(item)
                continue
            new, k = _apply(item, hot)
            out.append(new)
            n += k
            changed = changed or new is not item
        return (out if changed else obj), n
    if t is not dict:
        return obj, 0
    out, n, changed = {}, 0, False
    pair_is_secret = secret_name(obj.get("name")) and isinstance(obj.get("value"), str)
    for key, item in obj.items():
        ti = type(item)
        if key == "pinData" and item:
            out[key] = {} if ti is dict else None
            n += len(item) if ti is dict or ti is list else 1
            changed = True
        elif ti is str and (
                (key == "value" and pair_is_secret and looks_secret(item, norm(obj["name"]) in PASSWORD_KEYS))
                or (_key_verdict(key) and looks_secret(item, norm(key) in PASSWORD_KEYS))):
            out[key] = keep_scheme(item)
            n += 1
            changed = True
        elif (ti is str and item not in hot) or not (ti is str or ti is dict or ti is list):
            out[key] = item
        else:
            new, k = _apply(item, hot)
            out[key] = new
            n += k
            changed = changed or new is not item
    return (out if changed else obj), n
