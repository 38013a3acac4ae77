"""The rules of credential redaction for exports (pure): what looks like a secret in a template becomes `[REDACTED]`.

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
import re

from scraper.policy.redact.patterns import MARK, PART_RES, TOKEN_RE, TOKENS, may_match

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

# placeholders people put where a secret goes: YOUR_API_KEY, <apiKey>, [KEY], sk-xxxx..., changeme
_PLACEHOLDER_RE = re.compile(r"(?i)your|example|placeholder|changeme|_here\b|xxxx|\*\*\*|\.\.\.|^<.*>$|^\[.*\]$"
                             r"|^\{.*\}$|^(?:redacted|secret|password|token|null|none|undefined)$")
_CONSTANT_RE = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")      # an environment variable's name
_DROP = str.maketrans("", "", " \t\n_.-")
_SCHEME_RE = re.compile(r"(?i)^(?:bearer|basic|token|key|apikey|api-key)\s+")
# a cheap first look at the raw JSON text: a workflow without any of these needs no walk. A key's name is
# compared without _ - . and spaces (`norm`), so a word may be split by them (`P_W_D`, `Api-K.e.y`)
_HINT_WORDS = ("pindata", "pass", "secret", "token", "key", "auth", "bearer", "basic", "cookie", "pwd")
_HINT_RE = re.compile(r"(?i)" + "|".join(r"[\s_.-]*".join(w) for w in _HINT_WORDS)
                      + r"|://[^\s/@\"]+:[^\s/@\"]+@|" + "|".join(t.regex for t in TOKENS))


def text(s):
    """(s with every secret in it replaced by MARK, how many)."""
    if not isinstance(s, str) or not s or not may_match(s):
        return s, 0
    s, n = replace_group(TOKEN_RE, 0, "any", s)
    for pattern, group, sure in PART_RES:
        s, k = replace_group(pattern, group, sure, s)
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
    pair_is_secret = secret_name(obj.get("name")) and isinstance(obj.get("value"), str)
    for key, item in obj.items():
        if key == "pinData" and item:
            out[key] = {} if isinstance(item, dict) else None
            n += len(item) if isinstance(item, (dict, list)) else 1
        elif isinstance(item, str) and (
                (key == "value" and pair_is_secret and looks_secret(item, norm(obj["name"]) in PASSWORD_KEYS))
                or (secret_name(key) and looks_secret(item, norm(key) in PASSWORD_KEYS))):
            out[key] = keep_scheme(item)
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


def replace_group(pattern, group, sure, s):
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
def norm_str(name):
    return name.translate(_DROP).lower()


def norm(name):
    return norm_str(name) if isinstance(name, str) else ""


def secret_name(name):
    return norm(name) in SECRET_KEYS


def keep_scheme(s):
    """MARK in place of the secret, keeping a leading `Bearer `/`Basic ` so the shape stays readable."""
    m = _SCHEME_RE.match(s.lstrip("= "))
    return (m.group(0) if m else "") + MARK
