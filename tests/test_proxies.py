"""Proxies (issue 29): real proxy servers on loopback (tinyproxy bound to its own outgoing 127.0.0.x, a
dead port, hostile ones), real worker processes against the stand-in, which records each request's source
address and answers 403 to a banned one. The pool's pure rules are tested with a driven clock."""

import json
import os
import random
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from scraper.base import proxies, settings
from scraper.base.errors import ConfigError, FetchError
from scraper.db import store
from scraper.db.queue import Queue
from scraper.net import browser, http
from scraper.policy import proxies as policy
from scraper.politeness import proxypool
from scraper.politeness.limiter import DomainLimiter
from scraper.pool import worker
from scripts.standin import client
from tests import warm
from tests.helpers import in_process, jobs_in, rows, scraper, scraper_env

SECRET = "pw-Secret-29"
STANDIN_DOMAIN = "127.0.0.1"    # the stand-in's politeness domain (an address is its own domain)


def seeded(standin, tmp_path, templates, **options):
    """A stand-in and a database seeded from it directly, then the stand-in's counters zeroed: what the
    test counts is the run's traffic only."""
    site = standin(templates=templates, **options)
    db = tmp_path / "jobs.db"
    in_process(site, db, "seed", "--from-search", check=0)
    site.reset()
    return site, db


def status_of(site, db, env):
    done = in_process(site, db, "status", "--json", check=0, env=env)
    assert SECRET not in done.stdout
    return {p["url"]: p for p in json.loads(done.stdout)["proxies"]}, done.stdout


# --- configuration -----------------------------------------------------------------------------------------

def test_a_proxy_url_shows_no_credentials_anywhere_and_keeps_them_for_the_connection():
    p = proxies.parse("http://user:${PW}@127.0.0.1:3128", {"PW": SECRET})
    assert str(p) == "http://***:***@127.0.0.1:3128" and p.secret == f"http://user:{SECRET}@127.0.0.1:3128"
    assert json.dumps([p]) == '["http://***:***@127.0.0.1:3128"]' and SECRET not in repr(p)
    with pytest.raises(ValueError, match=r"names \$\{NOPE\}") as e:
        proxies.parse("http://u:${NOPE}@h:1", {})
    with pytest.raises(ConfigError) as e:
        settings.build(proxies=f"ftp://u:{SECRET}@h:1")
    assert SECRET not in str(e.value) and "***:***" in str(e.value)
    s = settings.build(proxies=f"http://u:{SECRET}@127.0.0.1:1,direct, socks5://127.0.0.2:1080")
    assert [str(x) for x in s.proxies] == ["http://***:***@127.0.0.1:1", "direct", "socks5://127.0.0.2:1080"]
    assert s.uses_proxies and s.proxies[0].secret.endswith(f"{SECRET}@127.0.0.1:1")


def test_a_source_s_own_proxies_win_and_are_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("PROXY_PW", SECRET)
    path = tmp_path / "sources.toml"
    path.write_text('[[source]]\nname = "shop"\nkind = "catalogue"\nsite = "http://127.0.0.1:9/"\n'
                    'proxies = ["http://u:${PROXY_PW}@127.0.0.1:3128", "direct"]\n')
    s, _ = settings.load(cli=[("sources", str(path), "--sources")], environ={})
    assert [str(p) for p in s.source("shop").proxies] == ["http://***:***@127.0.0.1:3128", "direct"]
    assert s.source("shop").proxies[0].password == SECRET
    path.write_text('[[source]]\nname = "shop"\nkind = "catalogue"\nsite = "http://127.0.0.1:9/"\nproxies = "x"\n')
    with pytest.raises(ConfigError, match="key 'proxies'"):
        settings.load(cli=[("sources", str(path), "--sources")], environ={})


# --- the pure rules, with time passed in -------------------------------------------------------------------

def test_quarantine_doubles_from_its_base_to_an_hour_with_bounded_jitter():
    rng = random.Random(7)
    h, now, seen = policy.Health(), 1000.0, []
    for _ in range(12):
        h = policy.on_failure(h, now, 60.0, rng)
        seen.append(h.until - now)
    assert 60.0 <= seen[0] <= 60.0 * (1 + policy.JITTER) and 120.0 <= seen[1] <= 150.0
    assert all(x <= policy.QUARANTINE_MAX_S for x in seen) and seen[-1] == policy.QUARANTINE_MAX_S
    assert h.streak == 12 and h.down_since == now and h.state == policy.QUARANTINED


def test_a_proxy_that_comes_back_after_its_quarantine_is_chosen_again():
    pool, now = ["http://a:1", "http://b:1"], 1000.0
    health = {"http://a:1": policy.on_failure(policy.Health(), now, 60.0, random.Random(1))}
    assert policy.choose(pool, health, "d", now + 1, bound="http://a:1") == "http://b:1"
    later = health["http://a:1"].until
    assert policy.needs_check(health["http://a:1"], later)
    assert policy.choose(pool, health, "d", later, start=0) == "http://a:1"   # usable again, first in the list
    health["http://a:1"] = policy.on_success(health["http://a:1"])
    assert health["http://a:1"].state == policy.GOOD and health["http://a:1"].streak == 0


def test_a_403_bans_only_while_another_proxy_is_usable_and_bans_are_per_domain():
    pool, now = ["http://a:1", "http://b:1"], 1000.0
    assert policy.bans_on_403(pool, {}, "d", now, "http://a:1")
    health = {"http://a:1": policy.Health(bans={"d": now + policy.BAN_S})}
    assert not policy.bans_on_403(pool, health, "d", now, "http://b:1")    # the last one: the site's answer
    assert policy.choose(pool, health, "d", now) == "http://b:1"
    assert policy.choose(pool, health, "other", now) == "http://a:1"


def test_the_run_gives_a_domain_up_only_after_every_proxy_stayed_unusable_long_enough():
    pool, now = ["http://a:1", "http://b:1"], 1000.0
    down = {p: policy.on_failure(policy.Health(), now, 60.0, random.Random(2)) for p in pool}
    assert not policy.gives_up(pool, down, "d", now + 30, 600)
    much_later = {p: policy.on_failure(h, now + 700, 60.0, random.Random(2)) for p, h in down.items()}
    assert policy.gives_up(pool, much_later, "d", now + 701, 600)
    assert not policy.gives_up([*pool, "direct"], much_later, "d", now + 701, 600)
    assert policy.wait_until(pool, down, "d", now) == min(h.until for h in down.values())



@hyp_settings(max_examples=80, deadline=None)
@given(streak=st.integers(1, 200), base=st.floats(0.01, 600), u=st.floats(0, 0.999))
def test_property_a_quarantine_is_at_least_its_base_and_at_most_an_hour(streak, base, u):
    q = policy.quarantine_s(streak, base, u)
    assert min(base, policy.QUARANTINE_MAX_S) <= q <= policy.QUARANTINE_MAX_S
    assert q <= policy.quarantine_s(streak + 1, base, u) or q == policy.QUARANTINE_MAX_S


@hyp_settings(max_examples=80, deadline=None)
@given(states=st.lists(st.tuples(st.floats(0, 2000), st.floats(0, 2000)), min_size=1, max_size=5),
       now=st.floats(0, 2000), start=st.integers(0, 10), bound=st.integers(0, 5))
def test_property_choose_only_ever_picks_a_usable_proxy_and_keeps_a_usable_bound_one(states, now, start, bound):
    pool = [f"http://p{i}:1" for i in range(len(states))]
    health = {p: policy.Health(policy.QUARANTINED if until > now else policy.GOOD, 1, until,
                               bans={"d": ban}) for p, (until, ban) in zip(pool, states, strict=True)}
    bound_proxy = pool[bound % len(pool)]
    picked = policy.choose(pool, health, "d", now, bound_proxy, start)
    usable = [p for p in pool if policy.usable(health[p], "d", now)]
    assert (picked is None) == (not usable)
    assert picked is None or picked in usable
    assert bound_proxy not in usable or picked == bound_proxy


# --- real proxies, real workers -----------------------------------------------------------------------------

@pytest.mark.timing      # it checks the site's rate window: run alone
def test_three_proxies_one_good_one_banned_one_dead_keep_the_site_s_rate(standin, proxy_servers, tmp_path,
                                                                         monkeypatch):
    site, db = seeded(standin, tmp_path, templates=80, rate=20, burst=5, latency_ms=20)
    good = proxy_servers(bind="127.0.0.2", user="u", password=SECRET)
    banned = proxy_servers(bind="127.0.0.3")
    dead = proxy_servers(mode="dead")
    site.clients(ban=["127.0.0.3"], secrets=[SECRET])
    env = {"SCRAPER_PROXIES": f"http://u:${{PROXY_PW}}@127.0.0.1:{good.port},{banned.url},{dead.url}",
           "PROXY_PW": SECRET}
    done = scraper(site, db, "run", "--workers", "4", "--rate", "20", "--burst", "5", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert jobs_in(db, "done") == 80
    stats = site.stats()
    assert stats["http_429"] == 0 and stats["max_in_1s"] <= 20 + 5
    assert set(stats["by_address"]) <= {"127.0.0.2", "127.0.0.3"}, stats["by_address"]   # nothing direct
    assert stats["by_address"].get("127.0.0.3", 0) <= 8 and dead.connections <= 8
    assert stats["secrets_seen"] == 0 and SECRET not in done.stderr
    monkeypatch.setenv("PROXY_PW", SECRET)       # `status` reads the same settings, in this process
    pool, text = status_of(site, db, env)
    assert SECRET not in in_process(site, db, "status", check=0, env=env).stdout
    assert pool[good.shown]["state"] == "good" and pool[good.shown]["requests"] >= 80
    assert pool[dead.shown]["state"] != "good" and pool[dead.shown]["failures"] >= 1
    assert pool[banned.url]["banned_domains"] == [STANDIN_DOMAIN], (pool, stats, done.stderr[-3000:])
    assert SECRET not in json.dumps(rows(db, "SELECT * FROM runs")) + json.dumps(rows(db, "SELECT * FROM proxies"))


@pytest.mark.parametrize("mode", ["garbage", "407", "reset", "dead"])
def test_a_hostile_proxy_ends_nothing_but_its_own_try(standin, proxy_servers, tmp_path, mode):
    """Garbage instead of HTTP, a 407, a reset mid-body, a port that closes: the job goes through the good
    proxy (a reset mid-body is the answer's failure: the job retries), every job is done, the worker and the
    run live on, and the hostile proxy is not left `good` unless it carried an answer."""
    site, db = seeded(standin, tmp_path, templates=6, rate=50, burst=5)
    bad, good = proxy_servers(mode=mode), proxy_servers(bind="127.0.0.2")
    env = {"SCRAPER_PROXIES": f"{bad.url},{good.url}", "SCRAPER_BACKOFF_BASE": "0.05"}
    done = scraper(site, db, "run", "--workers", "1", "--rate", "50", "--max-attempts", "5", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert jobs_in(db, "done") == 6 and "Traceback" not in done.stderr
    assert bad.connections >= 1 and set(site.stats()["by_address"]) == {"127.0.0.2"}
    pool, _ = status_of(site, db, env)
    assert pool[bad.url]["failures"] >= 1
    assert pool[good.url]["state"] == "good"


def test_a_quarantined_proxy_is_used_again_once_its_quarantine_is_over(standin, proxy_servers, tmp_path):
    """The only proxy fails (its port closes), the jobs wait uncounted; it comes back (a tinyproxy on the
    same port) and, its short quarantine over, carries every job."""
    site, db = seeded(standin, tmp_path, templates=4, rate=50, burst=5)
    dead = proxy_servers(mode="dead")
    env = {"SCRAPER_PROXIES": dead.url, "SCRAPER_PROXY_QUARANTINE": "0.5"}
    first = scraper(site, db, "run", "--workers", "1", "--give-up-after", "1", env=env)
    assert first.returncode == 3 and "no proxy could carry" in first.stderr, first.stderr[-2000:]
    assert jobs_in(db, "done") == 0 and rows(db, "SELECT MAX(attempts) AS a FROM jobs")[0]["a"] == 0
    dead.stop()
    back = proxy_servers(bind="127.0.0.2", port=dead.port)     # the same proxy, alive again
    done = scraper(site, db, "run", "--workers", "1", env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert jobs_in(db, "done") == 4 and site.stats()["by_address"] == {"127.0.0.2": 4}
    pool, _ = status_of(site, db, env)
    assert pool[back.url]["state"] == "good" and pool[back.url]["failures"] >= 1


@pytest.mark.timing     # drives Chromium
@pytest.mark.chromium
@pytest.mark.skipif(browser.problem("chromium") is not None, reason="no Chromium on PATH or no Playwright")
@pytest.mark.parametrize("remote", [False, True], ids=["local", "cdp"])
def test_the_browser_s_pages_go_through_the_pool(proxy_servers, tmp_path, request, remote):
    """A page rendered in the worker's browser and its script's request come through the proxy (the catalogue
    stand-in on 127.0.0.2 sees the proxy's outgoing 127.0.0.3, never this host's 127.0.0.1), credentials
    going to the proxy only: in the local browser, and in a remote one spoken to over CDP (net/cdppage: the
    context's proxyServer, its credentials answered to the proxy's challenge)."""
    endpoint = "cdp:" + request.getfixturevalue("cdp_endpoint") if remote else "local"
    proxy = proxy_servers(bind="127.0.0.3", user="u", password=SECRET)
    site = client.start(catalogue=True, events=6, seed=3, rate=5, burst=2)
    try:
        live = [e["url"] for e in site.truth()["events"] if "/live/" in e["url"]][:1]
        s = settings.build(db_path=str(tmp_path / "jobs.db"), rate_per_s=5, burst=2, timeout_s=20, workers=1,
                           proxies=f"http://u:{SECRET}@127.0.0.1:{proxy.port}", browser_endpoint=endpoint)
        conn = store.open_db(s.db_path)
        queue = Queue(conn)
        queue.seed([(f"events:{url.split(':', 2)[2]}", "catalogue", url, "127.0.0.2") for url in live], now=1.0)
        limiter = DomainLimiter(s.limiter_path, s.rate_per_s, s.burst, rate_of=s.rate_for)
        session = http.make_session(s.user_agent, trust_env=False)
        w = worker.Worker(s, "w0-1", queue, limiter, session=session,
                          proxies=proxypool.Pool(s, conn, session, "w0-1"))
        try:
            job = queue.claim(w.name, 2.0, s.lease_s, sites=["catalogue"])
            final_url, html = w.context(job).render(job.url)
            assert final_url == job.url and "application/ld+json" in html    # the script built the record
        finally:
            w.close()
            session.close()
            limiter.close()
            conn.close()
        stats = site.stats()
        assert stats["by_kind"].get("live_page") == 1 and stats["by_kind"].get("live_json") == 1
        assert set(stats["by_address"]) == {"127.0.0.3"}, stats["by_address"]     # robots.txt, page and script
    finally:
        site.proc.terminate()
        site.proc.wait()


@pytest.mark.timing      # it checks the site's rate window: run alone
def test_two_run_groups_on_postgresql_share_the_pool_and_the_site_s_limit(standin, proxy_servers, pg_url):
    """Two `scraper run` groups (two machines) on one PostgreSQL database, each with 2 workers and the same
    three proxies: the site still sees at most rate + burst in any second and no 429, nothing comes direct,
    and the dead proxy's quarantine, written once, is seen by both groups."""
    site = standin(templates=100, rate=20, burst=5, latency_ms=5)
    in_process(site, pg_url, "seed", "--from-search", check=0)
    site.reset()
    a, b, dead = proxy_servers(bind="127.0.0.2"), proxy_servers(bind="127.0.0.3"), proxy_servers(mode="dead")
    env = {**scraper_env(site, pg_url), "SCRAPER_PROXIES": f"{dead.url},{a.url},{b.url}"}
    groups = [warm.Popen([sys.executable, "-m", "scraper", "run", "--workers", "2", "--rate", "20",
                          "--burst", "5"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True, start_new_session=True) for _ in range(2)]
    try:
        for group in groups:
            assert group.wait(120) == 0, group.stderr.read()[-2000:]
    finally:
        for group in groups:
            if group.poll() is None:
                os.killpg(group.pid, signal.SIGKILL)
    assert rows(pg_url, "SELECT COUNT(*) AS n FROM jobs WHERE status = 'done'")[0]["n"] == 100
    stats = site.stats()
    assert stats["http_429"] == 0 and stats["max_in_1s"] <= 20 + 5
    assert set(stats["by_address"]) <= {"127.0.0.2", "127.0.0.3"}, stats["by_address"]
    assert dead.connections <= 4        # at most once per worker: the quarantine is shared at once
    health = {r["url"]: r for r in rows(pg_url, "SELECT * FROM proxies")}
    assert health[dead.url]["state"] == "quarantined", health
    assert sum(health.get(p.url, {}).get("requests", 0) for p in (a, b)) == 100, (health, stats)


def test_credentials_go_to_their_proxy_only_across_a_redirect(proxy_servers):
    """A page on 127.0.0.1 redirects to another path of its host, then to another host (127.0.0.2): the
    proxy's credentials reach neither host (tinyproxy takes them), the redirect within the domain comes
    through the same proxy, and the one to another host is refused before anything is sent there."""
    seen = []

    class Site(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((self.server.server_address[0], self.client_address[0], self.path, dict(self.headers)))
            target = {"/a": "/b", "/b": f"http://127.0.0.2:{other.server_address[1]}/c"}.get(self.path)
            self.send_response(302 if target else 200)
            self.send_header("Location" if target else "Content-Type", target or "text/plain")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    home, other = (ThreadingHTTPServer((host, 0), Site) for host in ("127.0.0.1", "127.0.0.2"))
    for server in (home, other):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    proxy = proxy_servers(bind="127.0.0.3", user="u", password=SECRET)
    session = http.make_session("test", trust_env=False)
    try:
        with pytest.raises(FetchError) as e:
            http.fetch(session, f"http://127.0.0.1:{home.server_address[1]}/a", 10, 2**20,
                       proxy=proxies.parse(proxy.url))
    finally:
        session.close()
        for server in (home, other):
            server.shutdown()
            server.server_close()
    assert "redirect to another domain refused" in str(e.value) and SECRET not in str(e.value)
    assert [(host, client, path) for host, client, path, _ in seen] == [("127.0.0.1", "127.0.0.3", "/a"),
                                                                        ("127.0.0.1", "127.0.0.3", "/b")]
    assert not any(SECRET in json.dumps(headers) or "Proxy-Authorization" in headers for *_, headers in seen)


@pytest.mark.parametrize("mode", ["407", "dead", "garbage"])
@pytest.mark.parametrize("scheme", ["https", "http"])
def test_a_failed_connect_or_a_hostile_answer_is_the_proxy_s_fault(proxy_servers, mode, scheme):
    """Through a proxy that refuses its CONNECT (407), closes, or answers garbage, for an https:// page (a
    CONNECT tunnel) or an http:// one, the failure is kind `proxy` (rotated, uncounted), never the site's;
    a socks5:// proxy that closes is the same."""
    bad = proxy_servers(mode=mode)
    session = http.make_session("test", trust_env=False)
    try:
        for proxy in (bad.url, f"socks5://127.0.0.1:{bad.port}") if mode == "dead" else (bad.url,):
            with pytest.raises(FetchError) as e:
                http.fetch(session, f"{scheme}://127.0.0.1:9/x", 5, 2**20, proxy=proxies.parse(proxy))
            assert e.value.kind == "proxy", (proxy, str(e.value))
    finally:
        session.close()


def test_with_proxies_the_environment_s_proxy_variables_are_not_used(standin, proxy_servers, tmp_path):
    """HTTP_PROXY names a dead proxy; the list says `direct` only: every job is done and the dead one never
    hears of it (without a list, the environment applies as before: the session trusts it)."""
    site, db = seeded(standin, tmp_path, templates=3, rate=50, burst=5)
    dead = proxy_servers(mode="dead")
    done = scraper(site, db, "run", "--workers", "1", "--proxy", "direct",
                   env={"HTTP_PROXY": dead.url, "http_proxy": dead.url, "NO_PROXY": "", "no_proxy": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    assert jobs_in(db, "done") == 3 and dead.connections == 0
    assert http.make_session("x").trust_env and not http.make_session("x", trust_env=False).trust_env


def test_a_walk_goes_through_the_pool_too(standin, proxy_servers, tmp_path):
    """`seed --from-search` (robots.txt and the search pages) with a dead proxy first in the list: the walk
    rotates past it and nothing reaches the site but through the good one."""
    site = standin(templates=30, rate=50, burst=5)
    dead, good = proxy_servers(mode="dead"), proxy_servers(bind="127.0.0.2")
    done = scraper(site, tmp_path / "jobs.db", "seed", "--from-search",
                   env={"SCRAPER_PROXIES": f"{dead.url},{good.url}"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert jobs_in(tmp_path / "jobs.db", "pending") == 30
    assert set(site.stats()["by_address"]) == {"127.0.0.2"} and dead.connections >= 1


def test_proxy_check_url_probes_each_proxy_before_the_run(standin, proxy_servers, tmp_path):
    """With proxy_check_url, the run probes each proxy before its workers start: the dead one is quarantined
    by its probe (its only connection) and no job is ever sent to it."""
    site, db = seeded(standin, tmp_path, templates=4, rate=50, burst=5)
    dead, good = proxy_servers(mode="dead"), proxy_servers(bind="127.0.0.2")
    env = {"SCRAPER_PROXIES": f"{dead.url},{good.url}", "SCRAPER_PROXY_CHECK_URL": site.url + "/_standin/stats"}
    done = scraper(site, db, "run", "--workers", "1", env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"proxy {dead.url} quarantined" in done.stderr and "its check of" in done.stderr
    assert dead.connections == 1 and site.stats()["by_address"] == {"127.0.0.2": 4}


def test_a_403_through_every_proxy_is_the_site_s_answer(standin, proxy_servers, tmp_path):
    """The site answers 403 to both proxies' addresses: no proxy stays banned (it was the site's answer, not
    a ban), and the jobs end `failed` with HTTP 403 as without proxies; the run ends 1, not hung."""
    site, db = seeded(standin, tmp_path, templates=3, rate=50, burst=5)
    a, b = proxy_servers(bind="127.0.0.2"), proxy_servers(bind="127.0.0.3")
    site.clients(ban=["127.0.0.2", "127.0.0.3"])
    # one job at a time, so each job's two tries are all there is (two in flight race over the bans: one may
    # ban the proxy the other just unbanned, and its job waits for a proxy and is tried a third time)
    done = scraper(site, db, "run", "--workers", "1", "--inflight", "1", env={"SCRAPER_PROXIES": f"{a.url},{b.url}"})
    assert done.returncode == 1, done.stderr[-2000:]
    assert jobs_in(db, "failed") == 3
    assert {r["http_status"] for r in rows(db, "SELECT http_status FROM jobs")} == {403}
    assert rows(db, "SELECT * FROM proxy_bans") == []
    assert site.stats()["by_address"] == {"127.0.0.2": 3, "127.0.0.3": 3}
