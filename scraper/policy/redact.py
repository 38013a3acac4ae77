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

import functools
import json
import re

MARK = "[REDACTED]"
# The version of the rules below. Bump it whenever they change (a pattern, a key name, a placeholder, what
# counts): a stored row's verdict `workflows.clean_at_rules` (see `verdict`) holds the version it was reached
# under, and the export trusts only the current one, so every row is redacted again until it is re-stored.
RULES_VERSION = 1
COLUMNS = ("workflow", "description", "explainer")     # where a template's author may leave secrets

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


# the export's fast path lives in its own module; `redact.workflow` is its entry point
from scraper.policy.redact_fast import _may_match, workflow  # noqa: E402
