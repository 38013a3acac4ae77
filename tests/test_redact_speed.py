"""The export's fast redaction (`redact.workflow`, and `text()`'s faster test) redacts exactly what the
walk before it did: the same output and the same counts over the stand-in's whole corpus, over every
string of it in other cases, and over strings built to sit on the edges of the patterns. (The speed is
measured by `make bench`: export_jsonl against export_jsonl_raw.)"""

import json

import pytest

from scraper.policy import redact
from scraper.policy.redact import patterns, rules
from scraper.sites import n8n
from scripts.standin.corpus import DATA_DIR, MAX_TEMPLATES, Corpus


def _old_text(s):
    """`text()` as it was before the fast path: the quick regex, then the whole pattern."""
    if (not isinstance(s, str) or not s or patterns.QUICK_RE.search(s.lower()) is None
            or patterns.ANY_RE.search(s) is None):
        return s, 0
    s, n = rules.replace_group(patterns.TOKEN_RE, 0, "any", s)
    for pattern, group, sure in patterns.PART_RES:
        s, k = rules.replace_group(pattern, group, sure, s)
        n += k
    return s, n


def _old(obj, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(redact, "text", _old_text)
        return redact.value(obj)


def _strings(obj):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, list):
        for item in obj:
            yield from _strings(item)
    elif isinstance(obj, dict):
        for key, item in obj.items():
            yield key
            yield from _strings(item)


@pytest.fixture(scope="module")
def corpus():
    c = Corpus(DATA_DIR, MAX_TEMPLATES, seed=1, faults=[], missing_fraction=0.0)
    rows, seen = [], set()
    for tid in c.ids:
        if c.combo(tid) in seen:    # the corpus repeats its combinations of real data: each one once
            continue
        seen.add(c.combo(tid))
        rows.append(n8n.extract(c.detail(tid), "2026-01-01T00:00:00+00:00"))
    return rows


def test_the_fast_walk_redacts_the_whole_corpus_exactly_as_before(corpus, monkeypatch):
    redacted = 0
    for row in corpus:
        wf = json.loads(row["workflow"])
        before = json.dumps(wf)
        old, new = _old(wf, monkeypatch), redact.workflow(wf)
        assert new == old
        assert json.dumps(wf) == before             # the input is left as it was
        redacted += new[1]
        for col in ("description", "explainer"):
            assert redact.text(row[col]) == _old_text(row[col])
    assert redacted > 0 and len(corpus) >= 20


def test_every_string_of_the_corpus_in_other_cases_gives_the_same_text(corpus):
    strings = set()
    for row in corpus:
        strings.update(_strings(json.loads(row["workflow"])))
    for s in strings:
        for variant in (s, s.upper(), "İ" + s, "K" + s.swapcase()):
            assert redact.text(variant) == _old_text(variant), variant[:200]


EDGES = [
    "Authorization: Bearer abcdefghijklmnopQRST1234", "token xyzXYZ0123456789abcd", "BASIC dXNlcjpwYXNzd29yZDEyMzQ=",
    "https://user:s3cretPass@host.example/path", "http://a:b@c", "?api_key=AbC123xyz&x=1", "&client-secret=zz9ZZ9zz9",
    "?access_token=abcDEF123456", "password = 'hunter2x'", 'PASSWD: "Tr0ub4dor&3"', "pwd='abcd'",
    'client_secret = "AbCdEf123456789"', 'refresh-token: "abcDEF123456ghi"', 'secret_key="ABCdef1234567890"',
    "sk-proj-abcdefghijklmnopqrstuvwxyz123456", "123456789:AAabcdefghijklmnopqrstuvwxyz0123456",
    "1234567890:AAabcdefghijklmnopqrstuvwxyz0123456", "AKIAABCDEFGHIJKLMNOP", "xoxb-1234567890-abcdef",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijk", "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "-----BEGIN RSA PRIVATE KEY-----\nabc\n-----END RSA PRIVATE KEY-----", "hf_abcdefghijklmnopqrstuvwxyz0123456",
    "ﬁle token ＡＢＣ", "ǅ secret ǆ", "straße password='ßßßßß'", "\x00key\x00", "apİ_key='AbC123xyz789'",
    "paſsword = 'hunter2x'", "Tᴏken abcdefghijklmnopQRST1234", "={{ $env.API_KEY }}", "YOUR_API_KEY",
]


@pytest.mark.parametrize("s", EDGES)
def test_edge_strings_give_the_same_text(s):
    for variant in (s, s.upper(), s.lower(), f'"{s}"', f"x {s} y", s + "İ"):
        assert redact.text(variant) == _old_text(variant)
    wf = {"nodes": [{"parameters": {"a": s, "headers": [{"name": "Authorization", "value": s}]}}], "pinData": {}}
    assert redact.workflow(wf) == redact.value(wf)
