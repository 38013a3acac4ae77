"""The patterns of redaction, each declared once with what the fast path needs: its regular expression,
how sure a match is, and the literals every match holds (lower case) with where they can sit from the start
of a match. The quick test, the one search over every pattern and the fast path's table of branches are all
made from these declarations, so a new pattern cannot be left out of any of them. Pure.
"""

import re
from dataclasses import dataclass

MARK = "[REDACTED]"


@dataclass(frozen=True)
class Pattern:
    regex: str
    literals: dict        # {literal in lower case: offsets from the start of a match where it can sit}
    sure: str = "any"     # "any": a match is a secret; "token": its group must also look like one


# known token formats, anywhere in any string
TOKENS = (
    Pattern(r"sk-(?:proj-|ant-(?:api\d\d-)?|svcacct-)?[A-Za-z0-9_-]{20,}", {"sk-": (0,)}),
    Pattern(r"(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}", {"sk_": (0,), "rk_": (0,)}),
    Pattern(r"apify_api_[A-Za-z0-9]{20,}", {"apify": (0,)}),
    Pattern(r"gh[pousr]_[A-Za-z0-9]{30,}", dict.fromkeys(("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), (0,))),
    Pattern(r"github_pat_[A-Za-z0-9_]{40,}", {"github_pat": (0,)}),
    Pattern(r"glpat-[A-Za-z0-9_-]{20,}", {"glpat": (0,)}),
    Pattern(r"xox[abposr]-[A-Za-z0-9-]{10,}", {"xox": (0,)}),
    Pattern(r"AKIA[0-9A-Z]{16}", {"akia": (0,)}),
    Pattern(r"AIza[0-9A-Za-z_-]{35}", {"aiza": (0,)}),
    Pattern(r"ya29\.[0-9A-Za-z_-]{20,}", {"ya29": (0,)}),
    Pattern(r"hf_[A-Za-z0-9]{30,}", {"hf_": (0,)}),
    Pattern(r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}", {"sg.": (0,)}),
    Pattern(r"\d{8,10}:AA[A-Za-z0-9_-]{33}", {":aa": (8, 9, 10)}),
    Pattern(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", {"eyj": (0,)}),
    Pattern(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----", {"-----begin": (0,)}),
)
SECRET_NAME = (r"api[_-]?key|api[_-]?token|api[_-]?secret|access[_-]?token|auth[_-]?token|refresh[_-]?token"
               r"|client[_-]?secret|secret[_-]?key|secret|password|passwd|token")
# parts of a string: only the pattern's group 1 is the secret. The offsets are those of the literal in the
# names the pattern lists (`api_key`: "key" at 4).
PARTS = (
    Pattern(r"\b(?:bearer|basic|token)\s+([A-Za-z0-9._~+/=-]{16,})",
            dict.fromkeys(("bearer", "basic", "token"), (0,)), "token"),
    Pattern(r"://[^\s:/@'\"]+:([^\s@/'\"]+)@", {"://": (0,)}),
    Pattern(r"[?&](?:api[_-]?key|key|token|access[_-]?token|auth[_-]?token|secret|client[_-]?secret|password|pwd)"
            r"=([^&\s\"'#]+)",                                               # [?&] then a name
            {"key": (1, 4, 5), "token": (1, 5, 6, 7, 8), "secret": (1, 7, 8), "pass": (1,), "pwd": (1,)}),
    Pattern(r"\b(?:pass(?:word|wd)?|pwd)\b[\"']?\s*[:=]\s*[\"']([^\"'\s]{4,})[\"']", {"pass": (0,), "pwd": (0,)}),
    Pattern(rf"\b(?:{SECRET_NAME})\b[\"']?\s*[:=]\s*[\"']([^\"'\s]{{8,}})[\"']",  # a name of SECRET_NAME
            {"key": (3, 4, 6, 7), "token": (0, 3, 4, 5, 6, 7, 8), "secret": (0, 3, 4, 6, 7), "pass": (0,)}, "token"),
)

TOKEN_RE = re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(t.regex for t in TOKENS) + r")(?![A-Za-z0-9])")
PART_RES = [(re.compile(p.regex, re.I), 1, p.sure) for p in PARTS]
# every literal, in declaration order: a string holding none of them (in lower case) matches no pattern
QUICK_LITERALS = tuple(dict.fromkeys(lit for p in (*TOKENS, *PARTS) for lit in p.literals))
TOKEN_LITERALS = tuple(dict.fromkeys(lit for t in TOKENS for lit in t.literals))
# whether a string needs the substitutions at all (most strings of a workflow do not): first the literals,
# searched in the lower-cased string (about 7x faster than the patterns), then the patterns in one search
QUICK_RE = re.compile("|".join(re.escape(lit) for lit in QUICK_LITERALS))
ANY_RE = re.compile(TOKEN_RE.pattern + "|" + "|".join(f"(?i:{p.regex})" for p in PARTS))

# the branches of ANY_RE, each with {literal: offsets}: every match of the branch holds one of its literals
# at one of those offsets, so the branch is tried only there
BRANCHES = [(TOKEN_RE, {lit: o for t in TOKENS for lit, o in t.literals.items()}),
            *((pattern, p.literals) for (pattern, _, _), p in zip(PART_RES, PARTS, strict=True))]
# the same, by literal: {literal: [(branch, offset), ...]}
BY_LITERAL: dict = {}
for _pattern, _literals in BRANCHES:
    for _lit, _offsets in _literals.items():
        BY_LITERAL.setdefault(_lit, []).extend((_pattern, o) for o in _offsets)

# characters that a case-insensitive pattern matches to an ASCII letter (İ ı ſ and the Kelvin sign)
ODD_CASE = ("\u0130", "\u0131", "\u017f", "\u212a")


def may_match(s):
    """`QUICK_RE.search(s.lower()) and ANY_RE.search(s)`, found faster where it can be (see `matches`)."""
    low = s.lower()
    if len(low) == len(s) and not any(c in s for c in ODD_CASE):
        return matches(s, low)      # a branch's literal is one of the quick ones: the quick test is in it
    return QUICK_RE.search(low) is not None and ANY_RE.search(s) is not None


def matches(s, s_low):
    """Whether `ANY_RE.search(s)` would match `s`, whose lower case `s_low` keeps every character's position
    and holds no `ODD_CASE` character: each branch is tried only at the offsets its literals allow (`match`
    at a position sees the characters before it, as `search` does)."""
    seen = {}
    for pattern, literals in BRANCHES:
        for lit, offsets in literals.items():
            at = seen.get(lit)
            if at is None:
                at, i = [], s_low.find(lit)
                while i >= 0:
                    at.append(i)
                    i = s_low.find(lit, i + 1)
                seen[lit] = at
            for i in at:
                for o in offsets:
                    if i >= o and pattern.match(s, i - o) is not None:
                        return True
    return False
