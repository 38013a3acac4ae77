"""Time driven, not waited for: workers on a real queue (SQLite and PostgreSQL), the network faked by
`responses`, and one `FakeClock` whose sleeps move time on at once. An outage of half an hour, the
doubling open period and a Retry-After of 600 s run here in milliseconds; the same behaviour at real
speed, in real processes against the stand-in, stays in tests/test_robots_e2e.py (the 503 storm, the
slow phase), tests/test_run_e2e.py and tests/test_operator.py."""

import random
import re

import pytest
import responses

from scraper.base import settings
from scraper.base.clock import FakeClock
from scraper.db import politeness as politeness_rows
from scraper.db import store
from scraper.db.queue import Queue
from scraper.net import http
from scraper.policy import breaker
from scraper.politeness import limiter, robots
from scraper.pool import worker
from scraper.sites import n8n
from tests.helpers import API, DOMAIN, NOW, SITE, definition_ids, detail_body, search_items

# templates whose whole answer the fixtures hold (6270 and the 20 definitions, where listed)
IDS = [i for i in dict.fromkeys([6270, *definition_ids()]) if i in {item["id"] for item in search_items()}][:6]
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
