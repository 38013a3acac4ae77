"""Side by side with Scrapy (issue 45): the same n8n stand-in, the same rate and burst, the same templates,
end to end (the listing, then every template), each crawler in one process group of its own, one after the
other. Efficiency is the physical limit over the wall time, ((requests - burst) / rate) / wall, measured at
the stand-in; `lost` counts the templates that exist and answer (neither a 404 nor a 403) but were not stored.

    .venv/bin/python -m scripts.bench_scrapy [--quick] [--only clean,faults] [--workdir DIR]

Scrapy is a dev extra (`pip install -e '.[bench]'`, which `make bench` installs); without it the Scrapy rows
say so and the project's still print. Scrapy's settings are its best for a polite crawl at a known rate:
DOWNLOAD_DELAY = 1 / rate without randomising, AutoThrottle off, robots.txt obeyed, 429 retried (its default
RETRY_HTTP_CODES), at 1 and at 4 requests at once per domain. Everything stays on 127.0.0.1.
"""

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from scripts.bench_faults import ORDINARY_FAULTS
from scripts.benchkit import PY, Results, chosen_sections, env_for, fresh_db, run_sections, scraper_cmd
from scripts.standin import client

SPIDER = Path(__file__).with_name("scrapy_templates.py")
CONCURRENCY = (4, 1)    # Scrapy's CONCURRENT_REQUESTS_PER_DOMAIN: its best, and the strictly polite one


def expected(site):
    """The ids a complete mirror stores: every template but the 404s and 403s."""
    corpus = site.corpus()
    gone = {int(k) for k, v in corpus["faults"].items() if v["kind"] in ("404", "403")}
    return {i for i in corpus["ids"] if i not in gone}


def ours(work, name, templates, rate, burst, faults):
    """`scraper seed --from-search` then `scraper run` (4 workers): {eff, wall, 429, lost}."""
    site = client.start(templates=templates, latency_ms=40, rate=rate, burst=burst, faults=faults)
    try:
        db = work / f"{name}.db"
        fresh_db(db).close()
        env = env_for(db, site.url)
        t0 = time.perf_counter()
        subprocess.run(scraper_cmd("seed", "--from-search", "--rate", str(rate), "--burst", str(burst)),
                       env=env, check=True, capture_output=True)
        run = subprocess.run(scraper_cmd("run", "--workers", "4", "--rate", str(rate), "--burst", str(burst)),
                             env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if run.returncode not in (0, 1):    # 1: the 403s end failed, as the site says
            raise RuntimeError(f"scraper run exited {run.returncode}: {run.stderr[-2000:]}")
        from scraper.db import store
        conn = store.connect(str(db))
        stored = {r[0] for r in conn.execute("SELECT id FROM workflows")}
        conn.close()
        return measured(site, rate, burst, wall, stored)
    finally:
        site.stop()


def scrapy(work, name, templates, rate, burst, faults, concurrency):
    """Scrapy's crawl of the same site: {eff, wall, 429, lost}."""
    site = client.start(templates=templates, latency_ms=40, rate=rate, burst=burst, faults=faults)
    try:
        out = work / f"{name}.jsonl"
        out.unlink(missing_ok=True)
        settings = {"DOWNLOAD_DELAY": 1 / rate, "RANDOMIZE_DOWNLOAD_DELAY": False, "AUTOTHROTTLE_ENABLED": False,
                    "CONCURRENT_REQUESTS_PER_DOMAIN": concurrency, "CONCURRENT_REQUESTS": max(16, concurrency),
                    "ROBOTSTXT_OBEY": True, "LOG_LEVEL": "ERROR", "TELNETCONSOLE_ENABLED": False,
                    "USER_AGENT": "scraper-bench (Scrapy)", "DOWNLOAD_TIMEOUT": 30}
        cmd = [PY, "-m", "scrapy", "runspider", str(SPIDER), "-a", f"api_url={site.api_url}", "-O", f"{out}:jsonl"]
        for key, value in settings.items():
            cmd += ["-s", f"{key}={value}"]
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, cwd=work)
        wall = time.perf_counter() - t0
        stored = {json.loads(line)["id"] for line in out.read_text().splitlines() if line.strip()}
        return measured(site, rate, burst, wall, stored)
    finally:
        site.stop()


def measured(site, rate, burst, wall, stored):
    stats = site.stats()
    lost = len(expected(site) - stored)
    return {"eff": ((stats["requests"] - burst) / rate) / wall, "wall": wall, "429": stats["http_429"],
            "lost": lost, "requests": stats["requests"]}


def have_scrapy():
    return shutil.which("scrapy", path=str(Path(PY).parent)) is not None or \
        subprocess.run([PY, "-c", "import scrapy"], capture_output=True).returncode == 0


def side_by_side(work, results, label, templates, rate, burst, faults, target):
    r = ours(work, f"{label}-ours", templates, rate, burst, faults)
    results.note(f"{label}: the project {r['eff']:.3f} in {r['wall']:.1f} s ({r['requests']} requests), "
                 f"429s {r['429']}, lost {r['lost']}")
    results.add(f"{label}_ours", r["eff"], "efficiency", "" if target is None else f">= {target}",
                None if target is None else r["eff"] >= target)
    results.add(f"{label}_ours_lost", r["lost"], "templates", "0", r["lost"] == 0)
    if not have_scrapy():
        results.note(f"{label}: Scrapy is not installed (pip install -e '.[bench]'); its rows are left out")
        return
    best = None
    for concurrency in CONCURRENCY:
        s = scrapy(work, f"{label}-scrapy{concurrency}", templates, rate, burst, faults, concurrency)
        results.note(f"{label}: Scrapy at {concurrency} per domain {s['eff']:.3f} in {s['wall']:.1f} s "
                     f"({s['requests']} requests), 429s {s['429']}, lost {s['lost']}")
        results.add(f"{label}_scrapy_c{concurrency}", s["eff"], "efficiency", "")
        results.add(f"{label}_scrapy_c{concurrency}_lost", s["lost"], "templates", "")
        best = s if best is None or s["eff"] > best["eff"] else best
    results.add(f"{label}_ahead", r["eff"] - best["eff"], "efficiency - Scrapy's best", "> 0",
                r["eff"] > best["eff"])


def bench_clean(work, quick, results):
    """600 templates at 20/s, clean: ahead of Scrapy, nothing lost. Issue 45's >= 0.985 is the `run` command's
    alone (`scripts.bench`'s `efficiency`); end to end, `seed` comes first, a process of its own with its walk,
    and the two starts and the listing's answers cost about 0.9 s of these 31 s, whatever the rate does."""
    side_by_side(work, results, "clean_600_at_20", 600, 20, 5, "", None)


def bench_faults(work, quick, results):
    """3,000 templates at 20/s with ordinary faults (issue 45: >= 0.99, ahead of Scrapy, nothing lost)."""
    n = 600 if quick else 3_000
    side_by_side(work, results, f"faults_{n}_at_20", n, 20, 5, ORDINARY_FAULTS, 0.99)


SECTIONS = {"clean": bench_clean, "faults": bench_faults}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="600 templates with faults instead of 3,000")
    parser.add_argument("--only", help=f"comma-separated sections: {','.join(SECTIONS)}")
    parser.add_argument("--workdir", help="keep the databases here (default: a temporary folder, deleted)")
    args = parser.parse_args(argv)
    return 1 if run_sections(SECTIONS, chosen_sections(parser, SECTIONS, args.only), Results(), args.workdir,
                             args.quick) else 0


if __name__ == "__main__":
    sys.exit(main())
