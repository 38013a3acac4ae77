"""Time driven, not waited for: workers on a real queue (SQLite and PostgreSQL), the network faked by
`responses`, and one `FakeClock` whose sleeps move time on at once. An outage of half an hour, the
doubling open period and a Retry-After of 600 s run here in milliseconds; the same behaviour at real
speed, in real processes against the stand-in, stays in tests/test_robots_e2e.py (the 503 storm, the
slow phase), tests/test_run_e2e.py and tests/test_operator.py. The adaptive slow-down is driven the same
way: a site's answers written to the request log second by second, the supervisor's pacing read after each."""

import random
import re

import pytest
import responses

from scraper.base import settings
from scraper.base.clock import FakeClock
from scraper.db import politeness as politeness_rows
from scraper.db import requestlog, store
from scraper.db.queue import Queue
from scraper.net import http
from scraper.policy import breaker
from scraper.policy import robots as rules
from scraper.politeness import limiter, rates, robots
from scraper.pool import pacing, worker
from scraper.sites import n8n
from tests.helpers import API, DOMAIN, NOW, SITE, definition_ids, detail_body, search_items

# templates whose whole answer the fixtures hold (6270 and the 20 definitions, where listed)
_LISTED = {item["id"] for item in search_items()}
IDS = [i for i in dict.fromkeys([6270, *definition_ids()]) if i in _LISTED][:6]
ANY_DETAIL = re.compile(re.escape(API) + r"/templates/workflows/(\d+)$")


@pytest.fixture
def pool(backend, net):
    """pool(n_workers, ids=IDS, **settings) -> (workers, queue, clock): workers sharing one queue and one
    fake clock, as the processes of a run share the database."""
    opened = []

    def build(n_workers=1, ids=IDS, **options):
        s = settings.build(db_path=backend, api_url=API, site_url=SITE, transcripts=False, **options)
        conn = store.open_db(s.db_path)
        q = Queue(conn)
        q.seed([(n8n.job_key(i), n8n.SITE, n8n.page_url(SITE, i), s.domain) for i in ids], now=NOW - 100)
        for url in (API, SITE):
            politeness_rows.save_robots(conn, robots.host_of(url), NOW, 404, b"", None, None, ())
        clock = FakeClock(NOW)
        workers = []
        for n in range(n_workers):
            wconn = store.connect(s.db_path)
            session = http.make_session(s.user_agent)
            workers.append(worker.Worker(s, f"w{n + 1}", Queue(wconn), limiter.NoLimiter(), session, clock=clock,
                                         rng=random.Random(n)))
            opened.append((wconn, session))
        opened.append((conn, None))
        return workers, q, clock

    yield build
    for conn, session in opened:
        if session is not None:
            session.close()
        conn.close()


def site(net, clock, answer):
    """The detail endpoint answers `answer(template_id, t)` -> status (200: the real answer), at fake time t;
    returns the list of (t, template_id) of every request."""
    sent = []

    def reply(request):
        tid = int(ANY_DETAIL.match(request.url).group(1))
        sent.append((clock.t, tid))
        status = answer(tid, clock.t)
        if status == 200:
            return 200, {}, detail_body(tid)
        return status, {}, b""

    net.add_callback(responses.GET, ANY_DETAIL, callback=reply)
    return sent


def next_event(q, now):
    """The next time anything changes for a waiting job: a breaker's open period or a probe's lease ends,
    a pause ends, a job's backoff ends."""
    times = [t for b in q.domains().values() for t in (b.open_until, b.probe_until, b.paused_until) if t > now]
    row = q.conn.execute("SELECT MIN(available_at) FROM jobs WHERE status = 'pending' AND available_at > ?",
                         (now,)).fetchone()
    times += [row[0]] if row[0] is not None else []
    return min(times, default=now + 1.0)


def drive(workers, q, clock, limit=2_000):
    """Step every worker in turn until no job is pending or running, or the domain was given up; when none
    could take a job, time jumps to the next event (what their idle naps would wait for). Returns the time."""
    for _ in range(limit):
        counts = q.counts()
        b = q.domains().get(DOMAIN, breaker.Breaker())
        if not counts.get("pending") and not counts.get("running") or b.gave_up:
            return clock.t
        stepped = [w.step() for w in workers]      # every worker takes its turn, as processes would
        if not any(stepped):
            clock.t = next_event(q, clock.t)
    raise AssertionError(f"the run did not end within {limit} steps: {q.counts()}")


def nonzero(counts):
    return {k: v for k, v in counts.items() if v}


def opened_periods(sent, storm_end):
    """The gaps between the requests sent during the storm, once the breaker opened: its open periods."""
    times = sorted({t for t, _ in sent if t < storm_end})
    return [round(b - a) for a, b in zip(times, times[1:], strict=False) if b - a >= 1]


def test_a_storm_that_outlasts_give_up_after_gives_the_domain_up_with_its_jobs_pending(pool, net):
    workers, q, clock = pool(2, breaker_failures=3, breaker_open_s=30, give_up_after_s=600, max_attempts=50)
    sent = site(net, clock, lambda tid, t: 503)                  # down for good
    end = drive(workers, q, clock)
    b = q.domains()[DOMAIN]
    assert b.gave_up and b.state == breaker.OPEN
    # given up only once the breaker had been open for --give-up-after, not at the third failed probe
    assert end - b.opened_at >= 600
    assert b.open_cycles >= settings.MAX_OPEN_CYCLES
    assert q.counts()["pending"] == len(IDS)                     # kept for the next run, none failed
    # while open, the domain heard one probe per open period, not a request per job
    assert len(sent) == 3 + b.open_cycles
    assert workers[0].step() is False and workers[1].step() is False


def test_a_blip_shorter_than_give_up_after_ends_with_every_job_done(pool, net):
    workers, q, clock = pool(2, breaker_failures=3, breaker_open_s=30, give_up_after_s=600, max_attempts=50)
    sent = site(net, clock, lambda tid, t: 503 if t < NOW + 200 else 200)   # a 200-second outage
    drive(workers, q, clock)
    assert nonzero(q.counts()) == {"done": len(IDS)}
    assert not q.domains()[DOMAIN].gave_up
    assert sent[-1][0] >= NOW + 200 and len(sent) < 3 + 10 + len(IDS)


def test_the_open_period_doubles_after_each_failed_probe_up_to_its_cap(pool, net):
    workers, q, clock = pool(1, breaker_failures=3, breaker_open_s=30, give_up_after_s=3600, max_attempts=500)
    storm_end = NOW + 3000
    sent = site(net, clock, lambda tid, t: 503 if t < storm_end else 200)
    drive(workers, q, clock)
    assert nonzero(q.counts()) == {"done": len(IDS)}
    # 30 s after the third failure, then 60, 120, 240, 480, then the 600 s cap
    periods = opened_periods(sent, storm_end)
    assert periods[:5] == [30, 60, 120, 240, 480]
    assert set(periods[5:]) == {breaker.OPEN_MAX_S}


def test_a_retry_after_is_honoured_by_every_worker(pool, net):
    workers, q, clock = pool(3, max_attempts=5, pause_max_s=900)
    calls = []

    def reply(request):
        tid = int(ANY_DETAIL.match(request.url).group(1))
        calls.append((clock.t, tid))
        if len(calls) == 1:
            return 429, {"Retry-After": "600"}, b""
        return 200, {}, detail_body(tid)

    net.add_callback(responses.GET, ANY_DETAIL, callback=reply)
    drive(workers, q, clock)
    assert nonzero(q.counts()) == {"done": len(IDS)}
    t429, answered_by = calls[0][0], {t for t, _ in calls[1:]}
    # nobody sent anything to the domain during the pause, whichever worker took the next job
    assert min(answered_by) >= t429 + 600
    assert q.domains()[DOMAIN].paused_until == t429 + 600
    assert len(calls) == len(IDS) + 1


# --- the adaptive slow-down, a minute of answers in milliseconds -------------------------------------

RATE = 10.0


def struggle(backend, answer, seconds=120, struggle_from=12, struggle_s=20):
    """The supervisor's pacing on a fake clock over `seconds` of a site answered at RATE per second:
    `answer(in_struggle, n)` -> (status, ms) of the n-th answer. Returns [(t, effective rate)], one a second
    from the run's start, and the log of the pacing."""
    s = settings.build(db_path=backend, api_url=API, site_url=SITE, transcripts=False, rate_per_s=RATE,
                       burst=5)
    conn = store.open_db(s.db_path)
    clock = FakeClock(NOW)
    pace = pacing.Pacing(s, conn, clock, clock.now())
    pace.start()
    rates_seen, n = [], 0
    for second in range(seconds):
        in_struggle = struggle_from <= second < struggle_from + struggle_s
        for k in range(int(RATE)):
            status, ms = answer(in_struggle, n)
            requestlog.record(conn, clock.now() + k / RATE, s.domain, "ok" if status == 200 else "http_5xx",
                              status, ms)
            n += 1
        clock.advance(1.0)
        pace.adapt(clock.monotonic())
        rates_seen.append((second + 1, rates.rate_of(conn, s, s.domain).rate_per_s))
    conn.close()
    return rates_seen


def halved_at(rates_seen, after):
    return next(t for t, r in rates_seen if t > after and r <= RATE / 2)


@pytest.mark.parametrize("kind", ["ten times slower", "a third 503"])
def test_a_struggling_site_is_halved_within_5_s_and_recovers_after(backend, kind, caplog):
    caplog.set_level("INFO")

    def answer(in_struggle, n):
        if not in_struggle:
            return 200, 40 + n % 7                                  # a healthy site: 40-46 ms
        if kind == "ten times slower":
            return 200, 400 + n % 70
        return (503, 30) if n % 3 == 0 else (200, 40)

    seen = struggle(backend, answer)
    assert all(r == RATE for t, r in seen if t <= 12)             # healthy: never slowed
    assert halved_at(seen, 12) <= 12 + 5                          # slowed within 5 s of the struggle
    assert min(r for _, r in seen) >= RATE * 0.1                   # never below a tenth
    assert seen[-1][1] == RATE                                     # and back to its rate after
    assert "recovered" in caplog.text


def test_a_healthy_site_with_ordinary_faults_and_a_busy_client_is_never_slowed(backend):
    def answer(in_struggle, n):
        if n % 33 == 0:
            return 503, 20                                         # one 503 in 33
        if n % 100 == 7:
            return 200, 3000                                       # a slow answer in a hundred
        if n < 2 * rules.WINDOW:
            return 200, 5 + n % 5                                  # the baseline: 5-9 ms on a quiet machine
        return 200, 20 + (n * 37) % 25                             # then 20-44 ms: a busy client, not the site

    seen = struggle(backend, answer, seconds=90, struggle_s=0)
    assert {r for _, r in seen} == {RATE}
