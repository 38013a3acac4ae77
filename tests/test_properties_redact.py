"""Property-based tests (hypothesis) of scraper/policy/redact/: nothing with a credential's shape survives,
and nothing else changes (structure, keys, other values), the count being the number of values replaced."""

import copy
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scraper.policy import redact

FAST = settings(max_examples=60, deadline=None)

ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
UPPER_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
URLSAFE = ALNUM + "_-"
B64 = ALNUM + "+/="
# what the module documents as a placeholder, not a secret (sk-xxxx..., YOUR_KEY, changeme ...): kept out
PLACEHOLDERISH = re.compile(r"(?i)your|example|placeholder|changeme|here|xxxx|\*\*\*|\.\.\.|^(?:redacted|secret"
                            r"|password|token|null|none|undefined)$")


def chars(alphabet, n, m=None):
    return st.text(alphabet, min_size=n, max_size=n if m is None else m)


def shape(*parts):
    """A token: the concatenation of literal strings and strategies."""
    return st.tuples(*(st.just(p) if isinstance(p, str) else p for p in parts)).map("".join)


# one strategy per token format the module knows (its _TOKENS), each well inside the format
TOKEN_SHAPES = {
    "openai": shape(st.sampled_from(["sk-", "sk-proj-", "sk-ant-", "sk-ant-api03-", "sk-svcacct-"]),
                    chars(URLSAFE, 20, 60)),
    "stripe": shape(st.sampled_from(["sk_live_", "sk_test_", "rk_live_", "rk_test_"]), chars(ALNUM, 16, 40)),
    "apify": shape("apify_api_", chars(ALNUM, 20, 40)),
    "github": shape(st.sampled_from(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]), chars(ALNUM, 30, 45)),
    "github_pat": shape("github_pat_", chars(ALNUM + "_", 40, 82)),
    "gitlab": shape("glpat-", chars(URLSAFE, 20, 30)),
    "slack": shape("xox", st.sampled_from("abposr"), "-", chars(ALNUM + "-", 10, 50)),
    "aws": shape("AKIA", chars(UPPER_DIGITS, 16)),
    "google": shape("AIza", chars(URLSAFE, 35)),
    "google_oauth": shape("ya29.", chars(URLSAFE, 20, 60)),
    "huggingface": shape("hf_", chars(ALNUM, 30, 40)),
    "sendgrid": shape("SG.", chars(URLSAFE, 22), ".", chars(URLSAFE, 43)),
    "telegram": shape(chars("0123456789", 8, 10), ":AA", chars(URLSAFE, 33)),
    "jwt": shape("eyJ", chars(URLSAFE, 8, 40), ".eyJ", chars(URLSAFE, 8, 60), ".", chars(URLSAFE, 8, 40)),
    "pem": shape("-----BEGIN ", st.sampled_from(["", "RSA ", "EC ", "OPENSSH ", "ENCRYPTED "]), "PRIVATE KEY-----\n",
                 st.lists(chars(B64, 1, 64), min_size=1, max_size=4).map("\n".join),
                 "\n-----END PRIVATE KEY-----"),
}
# the JWT and PEM bodies may hold other shapes; they are matched from their own start, first, as a whole
tokens = st.one_of(*TOKEN_SHAPES.values()).filter(lambda t: not PLACEHOLDERISH.search(t))

# text that cannot form a secret of any kind: lower-case words (no digits, no upper case: never a token's
# mix), spaces and punctuation that no pattern uses (no : = ? & / . _ - quotes)
filler = st.text("abcdefghijklmnopqrstuvwxyz ,;!()", max_size=30)
separators = st.sampled_from([" ", "\n", "\t", ", ", "; ", " (", ") ", " <", "> ", " | ", "\n\n"])


@st.composite
def planted_text(draw, max_tokens=3):
    """(text with secrets planted at random places, the same text with each replaced by MARK, the secrets)."""
    parts = [draw(filler)]
    expected = list(parts)
    secrets = draw(st.lists(tokens, max_size=max_tokens))
    for secret in secrets:
        sep1, after, sep2 = draw(separators), draw(filler), draw(separators)
        parts += [sep1, secret, sep2, after]
        expected += [sep1, redact.MARK, sep2, after]
    return "".join(parts), "".join(expected), secrets


def _normal_key(k):
    return redact.norm(k) not in redact.SECRET_KEYS and k not in ("pinData", "name", "value")


plain_keys = st.text(ALNUM[:52] + "_", min_size=1, max_size=12).filter(_normal_key)
# a key named like a secret, spelled as people do: apiKey, api_key, API-KEY, Client.Secret ...
secret_keys = st.builds(
    lambda word, upper, seps: "".join((c.upper() if u else c) + sep
                                      for c, u, sep in zip(word, upper, seps, strict=False)),
    st.sampled_from(sorted(redact.SECRET_KEYS)), st.lists(st.booleans(), min_size=30, max_size=30),
    st.lists(st.sampled_from(["", "", "", "", "_", "-", ".", " "]), min_size=30, max_size=30))
# a real-looking secret stored under such a key: 24+ characters with no space, not a placeholder
key_secrets = chars(ALNUM, 24, 48).filter(lambda s: not PLACEHOLDERISH.search(s))


def leaf():
    """(value, expected value, count, secrets) for a JSON leaf."""
    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    return (scalars.map(lambda v: (v, v, 0, [])) | planted_text().map(lambda t: (t[0], t[1], len(t[2]), t[2])))


def header_pair():
    """n8n's {name, value} header/query parameter whose name is a secret's: the value goes, the scheme stays."""
    return st.tuples(secret_keys, st.sampled_from(["", "Bearer ", "Basic ", "Token "]), key_secrets).map(
        lambda t: ({"name": t[0], "value": t[1] + t[2]}, {"name": t[0], "value": t[1] + redact.MARK}, 1, [t[2]]))


def extend(children):
    def as_list(items):
        secrets = [s for i in items for s in i[3]]
        return [i[0] for i in items], [i[1] for i in items], sum(i[2] for i in items), secrets

    def as_dict(args):
        items, secret_items = args
        obj = {k: v[0] for k, v in items.items()}
        exp = {k: v[1] for k, v in items.items()}
        n = sum(v[2] for v in items.values())
        secrets = [s for v in items.values() for s in v[3]]
        for k, s in secret_items.items():
            if k not in obj:
                obj[k], exp[k], n = s, redact.MARK, n + 1
                secrets.append(s)
        return obj, exp, n, secrets

    return (st.lists(children, max_size=4).map(as_list)
            | st.tuples(st.dictionaries(plain_keys, children, max_size=4),
                        st.dictionaries(secret_keys, key_secrets, max_size=2)).map(as_dict)
            | header_pair())


workflows = st.recursive(leaf(), extend, max_leaves=12)


def _strings(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, list):
        for item in obj:
            yield from _strings(item)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _strings(v)


@FAST
@given(planted=planted_text(max_tokens=4))
def test_text_replaces_every_planted_token_and_nothing_else(planted):
    s, expected, secrets = planted
    out, n = redact.text(s)
    assert (out, n) == (expected, len(secrets))
    for secret in secrets:
        assert secret not in out


@FAST
@given(wf=workflows, pins=st.dictionaries(plain_keys, st.lists(st.just({"json": {"k": "v"}}), max_size=2),
                                           max_size=3))
def test_value_removes_every_secret_and_keeps_everything_else(wf, pins):
    obj, expected, count, secrets = wf
    if pins:        # pinned execution data is emptied, one value per pinned node
        obj, expected, count = {"nodes": obj, "pinData": pins}, {"nodes": expected, "pinData": {}}, count + len(pins)
    before = copy.deepcopy(obj)
    out, n = redact.value(obj)
    assert obj == before                    # the input is left as it was
    assert out == expected                  # structure, keys and every other value unchanged
    assert n == count                       # one per replaced value
    dumped = json.dumps(out)
    for secret in secrets:
        assert secret not in dumped and all(secret not in s for s in _strings(out))
    # the export skips the walk when the raw text shows no hint of a secret: it must never skip one
    if n:
        assert redact.might_hold_secret(json.dumps(obj))
        assert redact.might_hold_secret(json.dumps(obj, ensure_ascii=False, separators=(",", ":")))
    assert redact.row({"workflow": obj, "other": "sk-" + "a1" * 20}) == ({"workflow": expected,
                                                                            "other": "sk-" + "a1" * 20}, n)


@FAST
@given(key=secret_keys, secret=key_secrets)
def test_a_secret_under_any_secret_key_is_seen_by_the_raw_text_hint(key, secret):
    obj = {"parameters": {key: secret}}
    assert redact.value(obj) == ({"parameters": {key: redact.MARK}}, 1)
    assert redact.might_hold_secret(json.dumps(obj))


harmless_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | filler,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(plain_keys, children, max_size=4),
    max_leaves=15)


@FAST
@given(obj=harmless_json)
def test_a_workflow_with_no_credential_shape_is_unchanged(obj):
    assert redact.value(obj) == (obj, 0)


@pytest.mark.parametrize("name", sorted(TOKEN_SHAPES))
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_every_token_format_the_module_knows_is_replaced_wherever_it_stands(name, data):
    secret = data.draw(TOKEN_SHAPES[name].filter(lambda t: not PLACEHOLDERISH.search(t)))
    before, after = data.draw(filler), data.draw(filler)
    sep1, sep2 = data.draw(separators), data.draw(separators)
    out, n = redact.text(before + sep1 + secret + sep2 + after)
    assert (out, n) == (before + sep1 + redact.MARK + sep2 + after, 1)
