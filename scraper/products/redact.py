"""Credential redaction for exports (pure): what looks like a secret in a template becomes `[REDACTED]`.

Published templates carry live-looking API keys, tokens and passwords in node parameters and pinData.
The database keeps the answers as served; every export format goes through `row()` unless the user
asks for `--no-redact`. What counts as one redacted value:

- a known token format anywhere in any string (OpenAI/Anthropic `sk-...`, Stripe, GitHub, GitLab, Slack
  `xox?-`, AWS `AKIA...`, Google `AIza...`/`ya29.`, Hugging Face `hf_`, SendGrid, Apify, Telegram bot
  tokens, JWTs, PEM private keys);
- the credential of an `Authorization`-style value (`Bearer`/`Basic`/`Token` + 16 or more characters);
- the password of a URL (`scheme://user:PASSWORD@host`) and secret query parameters (`?api_key=...`);
- `key = "value"` / `"password": "..."` assignments inside code and JSON text;
- in the workflow JSON, the string value of a key named like a secret (`apiKey`, `token`, `password`,
  `clientSecret`, `Authorization`, ...), and the `value` of a `{name, value}` header or query parameter
  whose name is one (how n8n's HTTP Request node stores headers);
- `pinData` (pinned execution data): emptied, one value per pinned node.

References and placeholders are left alone: n8n expressions (`={{ $env.API_KEY }}`), `$VARIABLES`,
`YOUR_API_KEY`, `<apiKey>`, `[YOUR_KEY]` and the like are not secrets.
"""

import bisect
import functools
import re

MARK = "[REDACTED]"

# key names (lower case, without _ - . and spaces) whose string values are secrets
SECRET_KEYS = frozenset("""
    apikey apitoken apisecret accesstoken accesskey secretaccesskey secretkey secret clientsecret appsecret
    consumersecret token authtoken bearertoken refreshtoken idtoken sessiontoken bottoken password passwd pwd
    passphrase privatekey signingsecret webhooksecret authorization proxyauthorization xapikey xauthtoken
    xaccesstoken cookie
""".split())
PASSWORD_KEYS = frozenset({"password", "passwd", "pwd", "passphrase"})

_TOKENS = [
    r"sk-(?:proj-|ant-(?:api\d\d-)?|svcacct-)?[A-Za-z0-9_-]{20,}",
    r"(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}",
    r"apify_api_[A-Za-z0-9]{20,}",
    r"gh[pousr]_[A-Za-z0-9]{30,}",
    r"github_pat_[A-Za-z0-9_]{40,}",
    r"glpat-[A-Za-z0-9_-]{20,}",
    r"xox[abposr]-[A-Za-z0-9-]{10,}",
    r"AKIA[0-9A-Z]{16}",
    r"AIza[0-9A-Za-z_-]{35}",
    r"ya29\.[0-9A-Za-z_-]{20,}",
    r"hf_[A-Za-z0-9]{30,}",
    r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}",
    r"\d{8,10}:AA[A-Za-z0-9_-]{33}",
    r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
]
_TOKEN_RE = re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(_TOKENS) + r")(?![A-Za-z0-9])")
_SECRET_NAME = (r"api[_-]?key|api[_-]?token|api[_-]?secret|access[_-]?token|auth[_-]?token|refresh[_-]?token"
                r"|client[_-]?secret|secret[_-]?key|secret|password|passwd|token")
# (pattern, the group that holds the secret, how sure the pattern is): only that group is replaced.
# "any": the pattern alone says it is a secret; "token": the group must also look like one (mixed case
# or digits), so prose such as "Basic workflow-automation" is left alone.
_PART_PATTERNS = [
    (r"\b(?:bearer|basic|token)\s+([A-Za-z0-9._~+/=-]{16,})", "token"),
    (r"://[^\s:/@'\"]+:([^\s@/'\"]+)@", "any"),
    (r"[?&](?:api[_-]?key|key|token|access[_-]?token|auth[_-]?token|secret|client[_-]?secret|password|pwd)"
     r"=([^&\s\"'#]+)", "any"),
    (r"\b(?:pass(?:word|wd)?|pwd)\b[\"']?\s*[:=]\s*[\"']([^\"'\s]{4,})[\"']", "any"),
    (rf"\b(?:{_SECRET_NAME})\b[\"']?\s*[:=]\s*[\"']([^\"'\s]{{8,}})[\"']", "token"),
]
_PARTS = [(re.compile(p, re.I), 1, sure) for p, sure in _PART_PATTERNS]
# whether a string needs the substitutions at all (most strings of a workflow do not): first literals
# every pattern above contains, searched in the lower-cased string (about 7x faster than the patterns),
# then the patterns themselves in one search
_QUICK_RE = re.compile(r"sk-|sk_|rk_|apify|gh[pousr]_|github_pat|glpat|xox|akia|aiza|ya29|hf_|sg\.|:aa|eyj|-----begin"
                       r"|bearer|basic|token|://|key|secret|pass|pwd")
_ANY_RE = re.compile(_TOKEN_RE.pattern + "|" + "|".join(f"(?i:{p})" for p, _ in _PART_PATTERNS))
# placeholders people put where a secret goes: YOUR_API_KEY, <apiKey>, [KEY], sk-xxxx..., changeme
_PLACEHOLDER_RE = re.compile(r"(?i)your|example|placeholder|changeme|_here\b|xxxx|\*\*\*|\.\.\.|^<.*>$|^\[.*\]$"
                             r"|^\{.*\}$|^(?:redacted|secret|password|token|null|none|undefined)$")
_CONSTANT_RE = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")      # an environment variable's name
_DROP = str.maketrans("", "", " \t\n_.-")
_SCHEME_RE = re.compile(r"(?i)^(?:bearer|basic|token|key|apikey|api-key)\s+")
# a cheap first look at the raw JSON text: a workflow without any of these needs no walk. A key's name is
# compared without _ - . and spaces (`_norm`), so a word may be split by them (`P_W_D`, `Api-K.e.y`)
_HINT_WORDS = ("pindata", "pass", "secret", "token", "key", "auth", "bearer", "basic", "cookie", "pwd")
_HINT_RE = re.compile(r"(?i)" + "|".join(r"[\s_.-]*".join(w) for w in _HINT_WORDS)
                      + r"|://[^\s/@\"]+:[^\s/@\"]+@|" + "|".join(_TOKENS))


def text(s):
    """(s with every secret in it replaced by MARK, how many)."""
    if not isinstance(s, str) or not s or not _may_match(s):
        return s, 0
    s, n = _replace_group(_TOKEN_RE, 0, "any", s)
    for pattern, group, sure in _PARTS:
        s, k = _replace_group(pattern, group, sure, s)
        n += k
    return s, n


def might_hold_secret(raw):
    """False when the raw text has nothing `value()` could redact (the export skips the walk)."""
    return bool(raw) and _HINT_RE.search(raw) is not None


def value(obj):
    """(a copy of the JSON value `obj` with secrets replaced, how many); `obj` is left as it was."""
    if isinstance(obj, str):
        return text(obj)
    if isinstance(obj, list):
        out, n = [], 0
        for item in obj:
            item, k = value(item)
            out.append(item)
            n += k
        return out, n
    if not isinstance(obj, dict):
        return obj, 0
    out, n = {}, 0
    pair_is_secret = _secret_name(obj.get("name")) and isinstance(obj.get("value"), str)
    for key, item in obj.items():
        if key == "pinData" and item:
            out[key] = {} if isinstance(item, dict) else None
            n += len(item) if isinstance(item, (dict, list)) else 1
        elif isinstance(item, str) and (
                (key == "value" and pair_is_secret and looks_secret(item, _norm(obj["name"]) in PASSWORD_KEYS))
                or (_secret_name(key) and looks_secret(item, _norm(key) in PASSWORD_KEYS))):
            out[key] = _keep_scheme(item)
            n += 1
        else:
            out[key], k = value(item)
            n += k
    return out, n


def looks_secret(s, password=False):
    """True when a value stored under a secret's name is a real-looking secret, not a reference or a
    placeholder (passwords may be short; tokens have 12 or more characters and are not plain words)."""
    s = s.strip()
    if s.startswith("=") and not s.startswith("=="):
        s = s[1:].strip()           # n8n's expression-mode prefix; what follows may still be a literal
    if "{{" in s or s.startswith("$") or not s:
        return False
    s = _SCHEME_RE.sub("", s)
    if not s or any(c.isspace() for c in s) or _placeholder(s):
        return False
    if password:
        return len(s) >= 4
    return len(s) >= 12 and (_kinds(s) >= 2 or len(s) >= 24)


def row(r, columns=("workflow", "description", "explainer")):
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


def _replace_group(pattern, group, sure, s):
    count = 0

    def sub(m):
        nonlocal count
        secret = m.group(group)
        if ("{{" in secret or secret.startswith("$") or secret == MARK or _placeholder(secret)
                or (sure == "token" and _kinds(secret) < 2)):
            return m.group(0)
        count += 1
        start, end = m.start(group) - m.start(0), m.end(group) - m.start(0)
        return m.group(0)[:start] + MARK + m.group(0)[end:]

    return pattern.sub(sub, s), count


def _placeholder(s):
    return _PLACEHOLDER_RE.search(s) is not None or _CONSTANT_RE.match(s) is not None


def _kinds(s):
    """How many of lower case, upper case and digits `s` mixes."""
    return sum(any(test(c) for c in s) for test in (str.islower, str.isupper, str.isdigit))


@functools.lru_cache(maxsize=4096)     # a workflow repeats the same few hundred keys
def _norm_str(name):
    return name.translate(_DROP).lower()


def _norm(name):
    return _norm_str(name) if isinstance(name, str) else ""


def _secret_name(name):
    return _norm(name) in SECRET_KEYS


def _keep_scheme(s):
    """MARK in place of the secret, keeping a leading `Bearer `/`Basic ` so the shape stays readable."""
    m = _SCHEME_RE.match(s.lstrip("= "))
    return (m.group(0) if m else "") + MARK


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
_QUICK_LITERALS = ("sk-", "sk_", "rk_", "apify", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat", "glpat", "xox",
                   "akia", "aiza", "ya29", "hf_", "sg.", ":aa", "eyj", "-----begin", "bearer", "basic", "token",
                   "://", "key", "secret", "pass", "pwd")
_TOKEN_LITERALS = ("sk-", "sk_", "rk_", "apify", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat", "glpat", "xox",
                   "akia", "aiza", "ya29", "hf_", "sg.", ":aa", "eyj", "-----begin")
# `_ANY_RE`'s branches, each with {literal: where it can sit from the start of a match}: every match of the
# branch holds one of its literals (in lower case) at one of those offsets, so the branch is tried only
# there. The offsets are those of the literal in the names the pattern lists (`api_key`: "key" at 4).
_BRANCHES = [
    (_TOKEN_RE, {**dict.fromkeys(_TOKEN_LITERALS, (0,)), ":aa": (8, 9, 10)}),      # \d{8,10}:AA
    (re.compile(_PART_PATTERNS[0][0], re.I), dict.fromkeys(("bearer", "basic", "token"), (0,))),
    (re.compile(_PART_PATTERNS[1][0], re.I), {"://": (0,)}),
    (re.compile(_PART_PATTERNS[2][0], re.I),     # [?&] then a name
     {"key": (1, 4, 5), "token": (1, 5, 6, 7, 8), "secret": (1, 7, 8), "pass": (1,), "pwd": (1,)}),
    (re.compile(_PART_PATTERNS[3][0], re.I), {"pass": (0,), "pwd": (0,)}),
    (re.compile(_PART_PATTERNS[4][0], re.I),     # a name of _SECRET_NAME
     {"key": (3, 4, 6, 7), "token": (0, 3, 4, 5, 6, 7, 8), "secret": (0, 3, 4, 6, 7), "pass": (0,)}),
]
# the same, by literal: {literal: [(branch, offset), ...]}
_BY_LITERAL = {}
for _pattern, _literals in _BRANCHES:
    for _lit, _offsets in _literals.items():
        _BY_LITERAL.setdefault(_lit, []).extend((_pattern, o) for o in _offsets)

# characters that a case-insensitive pattern matches to an ASCII letter (İ ı ſ and the Kelvin sign)
_ODD_CASE = ("\u0130", "\u0131", "\u017f", "\u212a")
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
        v = _VERDICTS[name] = _norm(name) in SECRET_KEYS
        if len(_VERDICTS) > 65_536:
            _VERDICTS.clear()
    return v


def _hot(strings):
    """The strings for which `text()` would do more than return them: step 2."""
    joined = _SEP.join(strings)
    low = joined.lower()
    if len(low) == len(joined) and not any(c in joined for c in _ODD_CASE):
        return _hot_in(strings, low)
    # rare: a character whose lower case is longer, or that matches an ASCII letter in another case
    plain = [s for s in strings if s.isascii()]
    hot = {s for s in strings if not s.isascii() and _QUICK_RE.search(s.lower()) is not None
           and _ANY_RE.search(s) is not None}
    return hot | _hot_in(plain, _SEP.join(plain).lower())


def _hot_in(strings, low):
    """`_hot` of strings whose lower case `low` (joined by _SEP) keeps every character's position: one pass
    over `low` per literal; at each place it occurs, the branches it belongs to are tried where a match
    could start (see `_matches`)."""
    hot = set()
    starts, at = [], 0
    for s in strings:
        starts.append(at)
        at += len(s) + 1
    ends = len(low)
    for lit, tries in _BY_LITERAL.items():
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


def _may_match(s):
    """`_QUICK_RE.search(s.lower()) and _ANY_RE.search(s)`, found faster where it can be (see `_matches`)."""
    low = s.lower()
    if len(low) == len(s) and not any(c in s for c in _ODD_CASE):
        return _matches(s, low)     # a branch's literal is one of the quick ones: the quick test is in it
    return _QUICK_RE.search(low) is not None and _ANY_RE.search(s) is not None


def _matches(s, s_low):
    """Whether `_ANY_RE.search(s)` would match `s`, whose lower case `s_low` keeps every character's position
    and holds no `_ODD_CASE` character: each branch is tried only at the offsets its literals allow (`match`
    at a position sees the characters before it, as `search` does)."""
    seen = {}
    for pattern, literals in _BRANCHES:
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
    pair_is_secret = _secret_name(obj.get("name")) and isinstance(obj.get("value"), str)
    for key, item in obj.items():
        ti = type(item)
        if key == "pinData" and item:
            out[key] = {} if ti is dict else None
            n += len(item) if ti is dict or ti is list else 1
            changed = True
        elif ti is str and (
                (key == "value" and pair_is_secret and looks_secret(item, _norm(obj["name"]) in PASSWORD_KEYS))
                or (_key_verdict(key) and looks_secret(item, _norm(key) in PASSWORD_KEYS))):
            out[key] = _keep_scheme(item)
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
