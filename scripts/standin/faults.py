"""The stand-in's faults: their kinds, the ``--faults`` parser, and the ``--hostile`` mode.

A fault spec is ``kind[xN]:fraction,...``: that share of the template ids answers with ``kind``, N times
(then normally) or for ever. Which ids get which fault is the corpus's business (``corpus.Corpus``).
"""

import math
import re

# Hostile answers: each is what a broken or malicious server may send with a 200.
#   deep      valid JSON nested a few hundred thousand levels
#   trickle   the headers, then one byte every --trickle-s seconds, never done
#   bomb      a small gzip body that expands to hundreds of MB
#   badutf8   the template's answer with bytes that are not UTF-8
#   surrogate the template's answer with a lone surrogate escape ("\ud800"): valid JSON, not valid UTF-8
#   huge      the template's answer padded to 60 MB (its Content-Length says so)
#   endless   a chunked body of blanks that never ends
#   wrong     another template's answer
HOSTILE_KINDS = ("deep", "trickle", "bomb", "badutf8", "surrogate", "huge", "endless", "wrong")
# Not in --hostile, as only the client's lease ends it: "stall" trickles its headers, a byte every --trickle-s.
STREAMED_KINDS = ("trickle", "huge", "endless", "stall")
FAULT_KINDS = ("503", "500", "502", "504", "reset", "truncate", "slow", "404", "403", *HOSTILE_KINDS, "stall")
# 404/403 and the hostile kinds are permanent unless a count is given; the rest hit once unless a count is given.
_PERMANENT_BY_DEFAULT = ("404", "403", *HOSTILE_KINDS, "stall")
_FAULT_RE = re.compile(rf"^({'|'.join(FAULT_KINDS)})(?:x(\d+))?:([0-9]*\.?[0-9]+)$")


def parse_faults(spec):
    """Parse ``kind[xN]:fraction,...`` into a list of (kind, times, fraction).

    times is None for "forever" (404/403 without a count, or any kind with x0).
    """
    faults = []
    for chunk in (spec or "").split(","):
        chunk = chunk.strip()
        if not chunk:
            continue
        match = _FAULT_RE.match(chunk)
        if not match:
            raise ValueError(
                f"bad fault {chunk!r}: expected kind[xN]:fraction with kind in {', '.join(FAULT_KINDS)}"
            )
        kind, count, fraction = match.group(1), match.group(2), float(match.group(3))
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"bad fault {chunk!r}: fraction must be within 0..1")
        if count is None:
            times = None if kind in _PERMANENT_BY_DEFAULT else 1
        else:
            times = int(count) or None
        faults.append((kind, times, fraction))
    return faults


def share(fraction, total):
    """Round fraction*total to the nearest integer, halves up (not banker's rounding)."""
    return int(math.floor(fraction * total + 0.5 + 1e-9))


def with_hostile(faults, fraction):
    """--faults plus each hostile kind at `fraction` (the --hostile mode)."""
    if not fraction:
        return faults
    extra = ",".join(f"{kind}:{fraction:g}" for kind in HOSTILE_KINDS)
    return f"{faults},{extra}" if faults else extra
