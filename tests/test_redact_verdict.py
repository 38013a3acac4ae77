"""The redaction decided when a template is stored (`workflows.clean_at_rules` and `redacted`, issue 19): the
export skips the redaction of a row found clean under the current rules and takes a row with secrets from
its saved redacted columns; its output is byte for byte what redacting every row gives, over the stand-in's
whole corpus; a row that holds a secret is never found clean."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scraper.db import store
from scraper.policy import redact
from scraper.policy.redact import verdicts
from scraper.products import export, files
from scraper.sites import n8n
from scripts.standin.corpus import DATA_DIR, MAX_TEMPLATES, Corpus
from tests.test_properties_redact import planted_text, tokens, workflows

FAST = settings(max_examples=80, deadline=None)


def _verdicts(conn):
    return {r[0]: r[1] for r in conn.execute("SELECT id, clean_at_rules FROM workflows ORDER BY id")}


def _decided(conn):
    return {r[0]: (r[1], r[2]) for r in conn.execute("SELECT id, clean_at_rules, redacted FROM workflows ORDER BY id")}


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    """A mirror of the whole corpus (each combination of its real data once), stored through the store's
    upsert as a run stores it, plus rows with planted secrets in each redacted column."""
    c = Corpus(DATA_DIR, MAX_TEMPLATES, seed=1, faults=[], missing_fraction=0.0)
    path = str(tmp_path_factory.mktemp("verdict") / "mirror.db")
    conn = store.open_db(path)
    seen = set()
    with store.transaction(conn) as t:
        for tid in c.ids:
            if c.combo(tid) in seen:
                continue
            seen.add(c.combo(tid))
            store.upsert(t, "workflows", n8n.extract(c.detail(tid), "2026-01-01T00:00:00+00:00"), "id")
        base = n8n.extract(c.detail(c.ids[0]), "2026-01-01T00:00:00+00:00")
        wf = json.loads(base["workflow"])
        planted = {
            "description": dict(base, description="use sk-proj-" + "Ab3" * 10 + " here"),
            "explainer": dict(base, explainer="Authorization: Bearer " + "Zx9" * 8),
            "workflow": dict(base, workflow=json.dumps(dict(wf, nodes=[*wf.get("nodes", []), {
                "parameters": {"apiKey": "q8Rk2LmZ7pWc4VtN1sXy6HbJ"}}]), ensure_ascii=False)),
        }
        for i, row in enumerate(planted.values(), start=10_000_001):
            store.upsert(t, "workflows", dict(row, id=i), "id")
    yield conn
    conn.close()


def _exports(conn, tmp_path, tag):
    """Every redacting export's bytes (JSON Lines, JSON, CSV with the workflow, Parquet, files) and their
    counts."""
    out, counts = {}, {}
    cols = export.choose_columns(conn, None)
    for fmt in ("jsonl", "json", "csv"):
        path = tmp_path / f"{tag}.{fmt}"
        counts[fmt] = export.write_file(conn, fmt, str(path), cols if fmt == "csv" else None)
        out[fmt] = path.read_bytes()
    path = tmp_path / f"{tag}.some.jsonl"        # chosen columns: only those are redacted and counted
    counts["some"] = export.write_file(conn, "jsonl", str(path), ["id", "explainer"])
    out["some"] = path.read_bytes()
    pytest.importorskip("pyarrow")
    path = tmp_path / f"{tag}.parquet"
    counts["parquet"] = export.write_file(conn, "parquet", str(path))
    import pyarrow.parquet as pq
    out["parquet"] = pq.read_table(path).to_pylist()     # the file's bytes carry its writer's metadata
    folder = tmp_path / f"{tag}-files"
    folder.mkdir()
    counts["files"] = files.write(conn, str(folder)).redacted
    out["files"] = {p.name: p.read_bytes() for p in sorted(folder.iterdir())}
    return out, counts


def test_the_export_with_verdicts_is_byte_identical_to_redacting_every_row(mirror, tmp_path):
    verdicts = _verdicts(mirror)
    assert sum(v == redact.RULES_VERSION for v in verdicts.values()) >= len(verdicts) // 2   # the skip is used
    assert [verdicts[i] for i in (10_000_001, 10_000_002, 10_000_003)] == [None, None, None]
    assert any(v is None for i, v in verdicts.items() if i < 10_000_001)      # the corpus's own secrets
    decided = _decided(mirror)
    assert all((v is None) == (saved is not None) for v, saved in decided.values())   # one or the other
    with_verdicts, counts = _exports(mirror, tmp_path, "with")
    mirror.execute("UPDATE workflows SET clean_at_rules = NULL, redacted = NULL")
    try:
        without, counts_without = _exports(mirror, tmp_path, "without")
    finally:
        with store.transaction(mirror) as t:
            for tid, (v, saved) in decided.items():
                t.execute("UPDATE workflows SET clean_at_rules = ?, redacted = ? WHERE id = ?", (v, saved, tid))
    for fmt in with_verdicts:
        assert with_verdicts[fmt] == without[fmt], fmt
        assert counts[fmt] == counts_without[fmt], fmt
    assert counts["jsonl"].redacted > 0 and b"[REDACTED]" in with_verdicts["jsonl"]
    assert b"clean_at_rules" not in with_verdicts["jsonl"] and b'"redacted"' not in with_verdicts["jsonl"]


def test_a_verdict_of_other_rules_is_not_trusted(mirror, tmp_path, monkeypatch):
    """Rules that changed (a new RULES_VERSION) redact every row again, whatever was stored."""
    assert redact.restore({}, json.dumps({"rules": redact.RULES_VERSION + 1, "values": 1, "columns": {}})) is None
    summary = export.write_file(mirror, "jsonl", str(tmp_path / "now.jsonl"))
    for holder in (redact, verdicts):
        monkeypatch.setattr(holder, "RULES_VERSION", redact.RULES_VERSION + 1)
    monkeypatch.setattr(verdicts, "text", lambda s: (s + "!", 1) if isinstance(s, str) and s else (s, 0))
    later = export.write_file(mirror, "jsonl", str(tmp_path / "later.jsonl"))
    assert later.redacted_rows > summary.redacted_rows


@FAST
@given(wf=workflows, description=st.one_of(st.none(), planted_text()), explainer=st.one_of(st.none(), planted_text()))
def test_a_row_is_found_clean_exactly_when_redacting_it_changes_nothing(wf, description, explainer):
    row = {"id": 1, "name": "n", "workflow": json.dumps(wf, ensure_ascii=False), "description": description,
           "explainer": explainer}
    out = dict(row)
    n = redact.stored(out)
    verdict, saved = redact.decided(row)
    assert (verdict == redact.RULES_VERSION) == (out == row) == (n == 0) == (saved is None)
    if saved is not None:       # the saved form is what the redaction gives
        restored = dict(row)
        assert redact.restore(restored, saved) == n and restored == out


@FAST
@given(secret=tokens, where=st.sampled_from(("description", "explainer", "workflow")))
def test_a_row_holding_a_secret_is_never_clean(secret, where):
    row = {"workflow": json.dumps({"nodes": [{"parameters": {"text": "a"}}]}), "description": "d", "explainer": "e"}
    row[where] = json.dumps({"nodes": [{"parameters": {"text": secret}}]}) if where == "workflow" else f"x {secret} y"
    assert redact.verdict(row) is None


def test_only_a_full_row_gets_a_verdict():
    assert redact.verdict({"workflow": "{}", "description": "a"}) is None      # the explainer is not known
    assert redact.verdict({"workflow": "{not json", "description": "a", "explainer": "b"}) is None
    assert redact.verdict({"workflow": None, "description": None, "explainer": None}) == redact.RULES_VERSION


def test_every_write_of_a_redacted_column_sets_the_verdict_again(backend):
    """On both backends: the upsert writes the verdict with the columns; a partial write of a redacted
    column makes it unknown; a write of other columns leaves it."""
    conn = store.open_db(backend)
    try:
        clean = {"id": 7, "name": "t", "workflow": '{"nodes":[]}', "description": "plain", "explainer": "plain"}
        with store.transaction(conn) as t:
            store.upsert(t, "workflows", clean, "id")
        assert _verdicts(conn) == {7: redact.RULES_VERSION}
        with store.transaction(conn) as t:
            store.upsert(t, "workflows", {"id": 7, "total_views": 3}, "id")
        assert _verdicts(conn) == {7: redact.RULES_VERSION}
        with store.transaction(conn) as t:
            store.upsert(t, "workflows", {"id": 7, "description": "token = 'Ab3dE6gH9jK2'"}, "id")
        assert _verdicts(conn) == {7: None}
        with store.transaction(conn) as t:
            store.upsert(t, "workflows", clean, "id")
        assert _verdicts(conn) == {7: redact.RULES_VERSION}
        with store.transaction(conn) as t:
            store.upsert(t, "workflows", dict(clean, explainer="?api_key=abcdef123456"), "id")
        assert _verdicts(conn) == {7: None}
        (_, saved), = _decided(conn).values()
        row = dict(clean, explainer="?api_key=abcdef123456")
        assert redact.restore(row, saved) == 1 and row["explainer"] == "?api_key=[REDACTED]"
        assert redact.restore({"id": 7, "explainer": "x"}, saved) is None     # not every column: redacted here
    finally:
        conn.close()
