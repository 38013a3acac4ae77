"""The WARC export of a whole library: 13,000 stored answers streamed with flat memory (issue 19).

    .venv/bin/python -m scripts.bench --only warc [--quick]

Peak RSS is the kernel's (/usr/bin/time -v) where it exists; the target is that 13,000 answers take no
more than 1.25 times the memory of 2,000.
"""

import zlib

from scraper.db import store
from scripts.benchkit import build_export_db, env_for, label, scraper_cmd, timed_peak
from scripts.standin.corpus import DATA_DIR, Corpus


def build_answers_db(path, n):
    """`n` templates, each with its stored API answer (the stand-in's real detail answers, ids varied)."""
    build_export_db(path, n)
    corpus = Corpus(DATA_DIR, 20, seed=1, faults=[], missing_fraction=0.0)
    bodies = [corpus.detail(tid) for tid in corpus.ids]
    conn = store.open_db(str(path))
    with store.transaction(conn) as c:
        c.executemany(
            "INSERT INTO answers (source, key, template_id, version, kind, content_hash, fetched_at, body_fetched_at, "
            "size, body, url, http_status, content_type) "
            "VALUES ('n8n', ?, ?, 1, 'api', 'h', ?, ?, ?, ?, ?, 200, 'application/json')",
            ((str(i), i, "2026-11-01T00:00:00+00:00", "2026-11-01T00:00:00+00:00", len(bodies[i % len(bodies)]),
              zlib.compress(bodies[i % len(bodies)], 9), f"https://api.n8n.io/api/templates/workflows/{i}")
             for i in range(1, n + 1)))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def bench_warc(work, quick, results):
    sizes, peaks = (500, 2_000) if quick else (2_000, 13_000), {}
    for n in sizes:
        db = work / f"warc{n}.db"
        build_answers_db(db, n)
        out = work / f"warc{n}.warc.gz"
        wall, peak = timed_peak(scraper_cmd("export", "--format", "warc", "--output", str(out)), env_for(db))
        peaks[n] = peak
        results.add(f"export_warc_{label(n)}", n / wall, "answers/s", "")
        results.add(f"export_warc_{label(n)}_rss", peak, "MB peak", "")
        results.note(f"warc {n:,} answers: {out.stat().st_size / 2**20:.1f} MB on disk")
        out.unlink()
    growth = peaks[sizes[1]] / peaks[sizes[0]]
    results.add("export_warc_rss_growth", growth, f"{label(sizes[1])} / {label(sizes[0])} answers", "< 1.25",
                growth < 1.25)
