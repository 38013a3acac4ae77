"""The rows of cheap refreshes (migration 27): `validators` (each URL's last answer that came with a validator,
its kept headers, body and validation time), `revalidation` (per source and endpoint kind: what validators
earned and the verdict), `lastmod_trust` (a catalogue source's sampled sitemap dates) and `revisits` (each
304 or unchanged 200, for the WARC export). The rules are `policy/revalidate`'s; the requests are
`politeness/revalidation`'s. One spelling serves both backends."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from scraper.db.backend import Conn
from scraper.db.dialect import same
from scraper.policy.revalidate import Counts


class Stored(NamedTuple):
    """A URL's last answer kept with its validators (`body` compressed, `size` its length before)."""

    url: str
    source: str
    endpoint: str
    etag: str | None
    last_modified: str | None
    accept_encoding: str
    headers: dict[str, str]
    status: int
    final_url: str | None
    content_type: str | None
    digest: str
    size: int
    body: bytes
    fetched_at: float
    validated_at: float
    checks: int
    lastmod: str | None = None      # a sitemap file's: the date its index gave it when it was fetched


_COLUMNS = ("url, source, endpoint, etag, last_modified, accept_encoding, headers, status, final_url, content_type, "
            "digest, size, body, fetched_at, validated_at, checks, lastmod")
_SAVE = same(f"""INSERT INTO validators ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (url) DO UPDATE SET source = excluded.source, endpoint = excluded.endpoint, etag = excluded.etag,
        last_modified = excluded.last_modified, accept_encoding = excluded.accept_encoding,
        headers = excluded.headers, status = excluded.status, final_url = excluded.final_url,
        content_type = excluded.content_type, digest = excluded.digest, size = excluded.size, body = excluded.body,
        fetched_at = excluded.fetched_at, validated_at = excluded.validated_at, checks = excluded.checks,
        lastmod = excluded.lastmod""")
_FRESHENED = same("UPDATE validators SET etag = ?, last_modified = ?, headers = ?, validated_at = ?, "
                  "checks = checks + 1 WHERE url = ?")
_COUNT = same("""INSERT INTO revalidation (source, endpoint, requests, conditional, not_modified, unchanged_200,
                                           bytes_saved, sampled, lied) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (source, endpoint) DO UPDATE SET requests = revalidation.requests + excluded.requests,
        conditional = revalidation.conditional + excluded.conditional,
        not_modified = revalidation.not_modified + excluded.not_modified,
        unchanged_200 = revalidation.unchanged_200 + excluded.unchanged_200,
        bytes_saved = revalidation.bytes_saved + excluded.bytes_saved,
        sampled = revalidation.sampled + excluded.sampled, lied = revalidation.lied + excluded.lied""")
_COUNTS = ("requests, conditional, not_modified, unchanged_200, bytes_saved, sampled, lied, state")


def load(conn: Conn, url: str) -> Stored | None:
    """The URL's kept answer, or None."""
    row = conn.execute(same(f"SELECT {_COLUMNS} FROM validators WHERE url = ?"), (url,)).fetchone()
    if row is None:
        return None
    values = list(row)
    values[6] = json.loads(values[6])
    values[12] = bytes(values[12])
    return Stored(*values)


def save(conn: Conn, s: Stored) -> None:
    """Keep (or replace) a URL's answer and its validators."""
    conn.execute(_SAVE, (s.url, s.source, s.endpoint, s.etag, s.last_modified, s.accept_encoding,
                         json.dumps(s.headers, sort_keys=True), s.status, s.final_url, s.content_type, s.digest,
                         s.size, s.body, s.fetched_at, s.validated_at, s.checks, s.lastmod))


def freshened(conn: Conn, url: str, headers: dict[str, str], at: float) -> None:
    """A 304's merged headers (and the validators they hold) kept, the validation time moved to `at`."""
    conn.execute(_FRESHENED, (headers.get("etag"), headers.get("last-modified"), json.dumps(headers, sort_keys=True),
                              at, url))


def dated(conn: Conn, url: str, lastmod: str | None) -> None:
    """The date a sitemap index gave the kept file at `url` when it was fetched."""
    conn.execute(same("UPDATE validators SET lastmod = ? WHERE url = ?"), (lastmod, url))


def forget(conn: Conn, url: str) -> None:
    """The URL's kept answer dropped (its latest answer came without a validator)."""
    conn.execute(same("DELETE FROM validators WHERE url = ?"), (url,))


def forget_endpoint(conn: Conn, source: str, endpoint: str) -> None:
    """Every kept answer of a source's endpoint dropped (its validators are sent no more)."""
    conn.execute(same("DELETE FROM validators WHERE source = ? AND endpoint = ?"), (source, endpoint))


def count(conn: Conn, source: str, endpoint: str, requests: int = 0, conditional: int = 0, not_modified: int = 0,
          unchanged_200: int = 0, bytes_saved: int = 0, sampled: int = 0, lied: int = 0) -> Counts:
    """Add to a source's endpoint's counts; its counts after."""
    conn.execute(_COUNT, (source, endpoint, requests, conditional, not_modified, unchanged_200, bytes_saved, sampled,
                          lied))
    found = counts(conn, source, endpoint)
    assert found is not None
    return found


def counts(conn: Conn, source: str, endpoint: str) -> Counts | None:
    row = conn.execute(same(f"SELECT {_COUNTS} FROM revalidation WHERE source = ? AND endpoint = ?"),
                       (source, endpoint)).fetchone()
    return None if row is None else Counts(*row)


def set_state(conn: Conn, source: str, endpoint: str, state: str) -> None:
    conn.execute(same("UPDATE revalidation SET state = ? WHERE source = ? AND endpoint = ?"), (state, source, endpoint))


def by_source(conn: Conn) -> dict[str, dict[str, Counts]]:
    """{source: {endpoint: Counts}} of every source that sent a request since migration 27."""
    out: dict[str, dict[str, Counts]] = {}
    for row in conn.execute(same(f"SELECT source, endpoint, {_COUNTS} FROM revalidation ORDER BY source, endpoint")):
        out.setdefault(row[0], {})[row[1]] = Counts(*list(row)[2:])
    return out


# --- sitemap dates ---------------------------------------------------------------------------------------

def lastmod_trust(conn: Conn, source: str) -> tuple[int, int]:
    """(sampled, lied) of a catalogue source's sitemap dates."""
    row = conn.execute(same("SELECT sampled, lied FROM lastmod_trust WHERE source = ?"), (source,)).fetchone()
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def lastmod_checked(conn: Conn, source: str, sampled: int, lied: int) -> None:
    """Add sampled pages (and those whose content changed under an unmoved date) to a source's trust."""
    conn.execute(same("INSERT INTO lastmod_trust (source, sampled, lied) VALUES (?, ?, ?) ON CONFLICT (source) DO "
                      "UPDATE SET sampled = lastmod_trust.sampled + excluded.sampled, "
                      "lied = lastmod_trust.lied + excluded.lied"), (source, sampled, lied))


def sample(conn: Conn, source: str, keys: list[str], at: float) -> None:
    """Stored pages queued to check their unmoved sitemap dates, with their content hash as stored now."""
    conn.executemany(same("INSERT INTO lastmod_samples (source, key, content_hash, queued_at) SELECT source, key, "
                          "content_hash, ? FROM items WHERE source = ? AND key = ? "
                          "ON CONFLICT (source, key) DO NOTHING"),
                     [(at, source, k) for k in keys])


def samples(conn: Conn, source: str) -> list[tuple[str, str, float, str | None, str | None]]:
    """The source's pages queued to check their dates: (key, content hash then, queued at, content hash now,
    fetched at now: ISO text or None)."""
    return [(r[0], r[1], float(r[2]), r[3], r[4]) for r in conn.execute(same(
        "SELECT s.key, s.content_hash, s.queued_at, i.content_hash, i.fetched_at FROM lastmod_samples AS s "
        "LEFT JOIN items AS i ON i.source = s.source AND i.key = s.key WHERE s.source = ?"), (source,))]


def settled(conn: Conn, source: str, keys: list[str]) -> None:
    conn.executemany(same("DELETE FROM lastmod_samples WHERE source = ? AND key = ?"), [(source, k) for k in keys])


def all_lastmod_trust(conn: Conn) -> dict[str, tuple[int, int]]:
    return {r[0]: (int(r[1]), int(r[2])) for r in conn.execute(same("SELECT source, sampled, lied FROM lastmod_trust"))}


# --- revisits ---------------------------------------------------------------------------------------------

def revisit(conn: Conn, url: str, at: float, profile: str, digest: str, refers_to_date: float,
            etag: str | None, last_modified: str | None) -> None:
    """One 304 (server-not-modified) or unchanged 200 (identical-payload-digest) of `url`."""
    conn.execute(same("INSERT INTO revisits (url, at, profile, digest, refers_to_date, etag, last_modified) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?)"), (url, at, profile, digest, refers_to_date, etag, last_modified))


def revisits_of(conn: Conn, url: str) -> list[Any]:
    """The revisits of `url`, oldest first: (at, profile, digest, refers_to_date, etag, last_modified)."""
    return conn.execute(same("SELECT at, profile, digest, refers_to_date, etag, last_modified FROM revisits "
                             "WHERE url = ? ORDER BY at"), (url,)).fetchall()
