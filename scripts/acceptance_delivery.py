"""Issue 41's two big Done-when runs of webhook delivery, measured and checked; exit 1 when a check fails.

kills: a run of 3,000 templates against the n8n stand-in with ordinary faults, a [[webhook]] endpoint on the
receiver stand-in, and 20 `kill -9`s at random moments of workers and of the delivery (the run's relay,
pool/relay, and a `scraper deliver --follow` beside it, started again after each kill); then the run
resumed until done and delivery run to the end. Every event of `events` must reach the receiver, every
repeat carry the same `webhook-id` and bytes, every request verify with standardwebhooks, and each
template's events match its stored versions exactly.

outage: the receiver down for 10 minutes (refusing connections for the first half, then 503) under a
compressed retry schedule, beside a second run with no endpoint against a stand-in of its own: afterwards
the receiver gets every event once the schedule allows, in strictly increasing seq with no gap, and the
crawl's requests per second during the outage are those of the run with no endpoint (both printed).

    .venv/bin/python -m scripts.acceptance_delivery [--only kills,outage] [--templates 3000] [--kills 20]
        [--outage-s 600] [--workdir DIR]

Everything stays on 127.0.0.1 (the stand-ins of scripts/standin/).
"""

import argparse
import base64
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from scraper.base.webhooks import HOLD_S, Endpoint, Secret
from scraper.db import answers, deliveries, events, store
from scraper.policy.delivery import JITTER
from scripts.bench_faults import ORDINARY_FAULTS
from scripts.benchkit import env_for, fresh_db, scraper_cmd
from scripts.standin import client

SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
HOOK_PATH = "/hook"
OK_EXITS = (0, 1)           # a run that ended: 1 says some jobs failed (the 404s and 403s of the faults)
# the compressed schedule, in steps of a 600 s outage: Svix's growth, then a try every tenth of the outage, and
# enough of those (891 s in all) that the endpoint outlives the outage rather than being disabled
OUTAGE_STEPS = (1, 5, 15, 30) + (60,) * 14


def say(text):
    print(text, flush=True)


# --- the receiver's log --------------------------------------------------------------------------

class Received:
    """The receiver's log, each request verified as it comes (Standard Webhooks refuses a timestamp older than
    5 minutes, so a log is checked while it grows, not at the end of a 10-minute outage)."""

    def __init__(self, secret):
        self.webhook = Webhook(secret)
        self.requests = []
        self.unverified = []

    def poll(self, receiver):
        for r in receiver.received()[len(self.requests):]:
            try:
                self.webhook.verify(r["body"], r["headers"])
            except WebhookVerificationError as e:
                self.unverified.append(f"{r['headers'].get('webhook-id')}: {e}")
            r["events"] = carried(r["body"])
            self.requests.append(r)

    def delivered(self):
        """The requests answered 2xx, in the order they came."""
        return [r for r in self.requests if isinstance(r["status"], int) and 200 <= r["status"] < 300]


def carried(body):
    """The events of one request's body (a CloudEvent or a batch of them): [{id, seq, type, subject, data}]."""
    parsed = json.loads(body)
    return [{"id": e["id"], "seq": int(e["sequence"]), "type": e["type"], "subject": e["subject"],
             "data": e.get("data")} for e in (parsed if isinstance(parsed, list) else [parsed])]


def verify_tampered(received):
    """Whether the first request verifies and fails with one byte of its body changed (the check bites)."""
    r = next(iter(received.requests), None)
    if r is None:
        return False
    body = r["body"]
    try:
        received.webhook.verify(body, r["headers"])
    except WebhookVerificationError:
        return False
    try:
        received.webhook.verify(("X" if body[0] != "X" else "Y") + body[1:], r["headers"])
    except WebhookVerificationError:
        return True
    return False


# --- the scraper's side --------------------------------------------------------------------------

def hook_config(folder, name, ep):
    """A scraper.toml that declares the endpoint `ep` (its secret from HOOK_SECRET); returns its path."""
    path = Path(folder) / f"{name}.toml"
    path.write_text(f'[[webhook]]\nurl = "{ep.url}"\nsecret = "${{HOOK_SECRET}}"\nbatch = {ep.batch}\n'
                    f"retry = [{', '.join(f'{s:g}' for s in ep.retry)}]\ntimeout = {ep.timeout_s:g}\n"
                    f"hold = {ep.hold_s:g}\n")
    return path


def endpoint(url, retry, timeout_s, batch, hold_s=HOLD_S):
    """The endpoint a configuration file declares (`hook_config` writes it; its state is read by its URL)."""
    return Endpoint(url, (Secret(SECRET),), batch=batch, retry=tuple(retry), timeout_s=timeout_s, hold_s=hold_s)


def scraper_env(db, site, config=None):
    env = {**env_for(db, site.url), "HOOK_SECRET": SECRET}
    if config is not None:
        env["SCRAPER_CONFIG"] = str(config)
    return env


def seeded(folder, name, site, rate, burst, config=None):
    """A fresh database seeded from the stand-in's search; (db path, env). The seed's requests do not count."""
    db = Path(folder) / f"{name}.db"
    fresh_db(db).close()
    env = scraper_env(db, site, config)
    subprocess.run(scraper_cmd("seed", "--from-search", "--rate", f"{rate:g}", "--burst", str(burst)), env=env,
                   check=True, capture_output=True)
    site.reset()
    return db, env


def start_run(env, workers, rate, burst, log_path):
    with open(log_path, "a", encoding="utf-8") as err:
        return subprocess.Popen(scraper_cmd("run", "--workers", str(workers), "--rate", f"{rate:g}", "--burst",
                                            str(burst)), env=env, stdout=subprocess.DEVNULL, stderr=err)


def start_deliver(env, log_path):
    with open(log_path, "a", encoding="utf-8") as err:
        return subprocess.Popen(scraper_cmd("deliver", "--follow"), env=env, stdout=subprocess.DEVNULL, stderr=err)


def stop(proc, timeout_s=60):
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def backlog(db, ep):
    """(events not yet delivered to `ep`, whether it is disabled, its last error)."""
    conn = store.connect(str(db))
    try:
        (st,) = deliveries.report(conn, [ep.shown], time.time())
    finally:
        conn.close()
    return st["backlog"], st["disabled"], st["last_error"]


def deliver_to_the_end(db, env, ep, received, receiver, log_path, limit_s):
    """`scraper deliver --follow` until the endpoint's backlog is empty (or `limit_s` passed); seconds taken."""
    started = time.monotonic()
    proc = start_deliver(env, log_path)
    try:
        while time.monotonic() - started < limit_s:
            received.poll(receiver)
            left, disabled, _ = backlog(db, ep)
            if not left or disabled:
                break
            time.sleep(0.5)
    finally:
        stop(proc)
    received.poll(receiver)
    return time.monotonic() - started


def outbox(db):
    conn = store.connect(str(db))
    try:
        return [events.as_dict(r) for r in events.after(conn, 0)]
    finally:
        conn.close()


def stored_versions(db, keys):
    """{template key: [(version, content hash), ...]} of the answers the mirror stored, oldest first."""
    conn = store.connect(str(db))
    try:
        return {k: [(v["version"], v["content_hash"]) for v in answers.versions(conn, "n8n", k, "api")] for k in keys}
    finally:
        conn.close()


# --- kills ---------------------------------------------------------------------------------------

def _relay_of(run, workers, wait_s=30.0):
    """The pid of the run's relay: its first child, forked before the supervisor starts any worker."""
    deadline = time.monotonic() + wait_s
    parent = psutil.Process(run.pid)
    first = None
    while time.monotonic() < deadline and run.poll() is None:
        pids = sorted(c.pid for c in parent.children())
        if pids and first is None:
            first = pids[0]
        if len(pids) >= workers + 1:
            return first
        time.sleep(0.005)
    raise RuntimeError("the run did not start its relay and workers")


def _alive(pid):
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def kills_run(folder, templates=3000, kills=20, rate=20.0, burst=5, workers=4, batch=10, timeout_s=5.0, seed=1,
              receiver_delay_s=0.2, hold_s=HOLD_S):
    """Issue 41's first Done-when run; returns (figures, failures). The receiver answers after
    `receiver_delay_s`, so that a deliverer is often killed mid-attempt: the endpoint then waits out the
    attempt's hold (`timeout_s` + `hold_s`) and its batch goes again."""
    rng = random.Random(seed)
    failures, figures = [], {"templates": templates, "kills_asked": kills}
    log_path = Path(folder) / "kills.log"
    with client.start(templates=templates, latency_ms=20, rate=rate, burst=burst, faults=ORDINARY_FAULTS) as site, \
            client.start(kind="receiver", delay_s=receiver_delay_s) as receiver:
        url = receiver.url + HOOK_PATH
        retry = (0.5, 1, 2, 5)      # a failed attempt (none is expected: the receiver answers 200) retried soon
        ep = endpoint(url, retry, timeout_s, batch, hold_s)
        config = hook_config(folder, "kills", ep)
        db, env = seeded(folder, "kills", site, rate, burst, config)
        received = Received(SECRET)
        t0 = time.monotonic()
        run = start_run(env, workers, rate, burst, log_path)
        relay = _relay_of(run, workers)
        follower = start_deliver(env, log_path)
        done = {"worker": 0, "relay": 0, "deliver": 0}
        runs = 1
        mean_gap = 0.6 * templates / rate / kills      # the kills fall in the first 60 % of the run's expected time
        try:
            while sum(done.values()) < kills:
                time.sleep(rng.uniform(0.2, 2 * mean_gap))
                received.poll(receiver)
                if run.poll() is not None:
                    if run.returncode in OK_EXITS:
                        break
                    run, runs = start_run(env, workers, rate, burst, log_path), runs + 1
                    continue
                kind = rng.choice(("worker", "delivery"))
                if kind == "worker":
                    busy = [c.pid for c in psutil.Process(run.pid).children() if c.pid != relay and _alive(c.pid)]
                    if not busy:
                        continue
                    os.kill(rng.choice(busy), signal.SIGKILL)
                    done["worker"] += 1
                elif _alive(relay) and rng.random() < 0.5:
                    os.kill(relay, signal.SIGKILL)
                    done["relay"] += 1
                else:
                    follower.kill()
                    follower.wait()
                    done["deliver"] += 1
                    follower = start_deliver(env, log_path)
            # the run resumed until done: a run that ended otherwise than by finishing is started again
            while run.wait() not in OK_EXITS and runs < 5:
                run, runs = start_run(env, workers, rate, burst, log_path), runs + 1
            figures["run_s"] = time.monotonic() - t0
            figures["run_exit"] = run.returncode
            stop(follower)
            # each deliverer killed mid-attempt may leave its hold to run out before the next one goes on
            figures["deliver_tail_s"] = deliver_to_the_end(db, env, ep, received, receiver, log_path,
                                                           (timeout_s + hold_s) * (done["relay"] + done["deliver"] + 1)
                                                           + 120)
        finally:
            stop(run)
            stop(follower)
        stats = site.stats()
        figures.update(kills=done, runs=runs, site_requests=stats["requests"], faults_served=stats["faults_served"])
        left, disabled, last_error = backlog(db, ep)
    figures.update(backlog=left, disabled=disabled)
    if sum(done.values()) < kills:
        failures.append(f"only {sum(done.values())} of {kills} kills fell before the run ended")
    if left or disabled:
        failures.append(f"{left} event(s) not delivered (disabled: {disabled}, last error: {last_error})")
    failures += check_received(received, outbox(db), figures)
    failures += check_versions(received, db, figures)
    return figures, failures


def check_received(received, stored, figures):
    """Every stored event reached the receiver in a 2xx answer; each repeat had the same webhook-id and bytes;
    every request verified."""
    failures = []
    ok = received.delivered()
    got = {e["id"] for r in ok for e in r["events"]}
    wanted = {e["id"] for e in stored}
    bodies, ids_of = {}, {}
    for r in received.requests:
        bodies.setdefault(r["headers"]["webhook-id"], set()).add(r["body"])
        for e in r["events"]:
            ids_of.setdefault(e["id"], set()).add(r["headers"]["webhook-id"])
    seen = [e["id"] for r in ok for e in r["events"]]
    figures.update(events=len(wanted), requests=len(received.requests), delivered_requests=len(ok),
                   repeated_events=len(seen) - len(set(seen)),
                   repeated_requests=len(received.requests) - len(bodies),
                   unverified=len(received.unverified), tamper_detected=verify_tampered(received))
    if wanted - got:
        failures.append(f"{len(wanted - got)} of {len(wanted)} events never reached the receiver "
                        f"(e.g. {sorted(wanted - got)[:3]})")
    if got - wanted:
        failures.append(f"{len(got - wanted)} events reached the receiver that `events` does not hold")
    differing = [k for k, v in bodies.items() if len(v) > 1]
    if differing:
        failures.append(f"{len(differing)} webhook-id(s) sent with different bytes (e.g. {differing[0]})")
    split = [k for k, v in ids_of.items() if len(v) > 1]
    if split:
        failures.append(f"{len(split)} event(s) sent under more than one webhook-id (e.g. {split[0]})")
    if received.unverified:
        failures.append(f"{len(received.unverified)} request(s) failed verification: {received.unverified[0]}")
    if not figures["tamper_detected"]:
        failures.append("a body with one byte changed still verified (or no request came)")
    return failures


def check_versions(received, db, figures):
    """Each template's template.* events (as received, each once, in seq order) are its stored versions."""
    by_id = {}
    for r in received.delivered():
        for e in r["events"]:
            by_id[e["id"]] = e
    per_template = {}
    for e in sorted(by_id.values(), key=lambda e: e["seq"]):
        if e["type"] in ("template.created", "template.updated"):
            per_template.setdefault(e["subject"], []).append((e["data"]["version"], e["data"]["content_hash"]))
    stored = stored_versions(db, sorted(per_template))
    conn = store.connect(str(db))
    try:
        stored_keys = {str(r[0]) for r in answers.stored(conn, "n8n") if r[2] == "api"}
    finally:
        conn.close()
    figures["templates_with_events"] = len(per_template)
    figures["templates_stored"] = len(stored_keys)
    failures = []
    if stored_keys != set(per_template):
        failures.append(f"{len(stored_keys ^ set(per_template))} template(s) stored without events or with events "
                        f"and nothing stored")
    wrong = [k for k, v in per_template.items() if stored[k] != v]
    if wrong:
        failures.append(f"{len(wrong)} template(s) whose events differ from their stored versions (e.g. {wrong[0]}: "
                        f"events {per_template[wrong[0]]}, stored {stored[wrong[0]]})")
    return failures


# --- outage --------------------------------------------------------------------------------------

def free_port():
    """A port nothing listens on (the receiver's, while it is down: connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request_times(site):
    """The wall times of the requests the stand-in had, in order."""
    log = site.request_log()
    return sorted(log["t0_wall"] + t for series in log["by_kind"].values() for t in series)


def crawl_rate(times, start, end):
    """Requests per second between wall times `start` and `end` (or the last request, when earlier); and that
    end."""
    until = min(end, times[-1]) if times else start
    inside = [t for t in times if start <= t <= until]
    return (len(inside) / (until - start) if until > start else 0.0), until


def outage_run(folder, outage_s=600.0, rate=5.0, burst=2, workers=2, batch=100, timeout_s=5.0, retry=None,
               templates=None):
    """Issue 41's second Done-when run; returns (figures, failures)."""
    retry = tuple(retry or (s * outage_s / 600 for s in OUTAGE_STEPS))
    templates = templates or int(rate * outage_s * 1.1) + 20   # both runs crawl through the whole outage
    failures, figures = [], {"outage_s": outage_s, "retry": " ".join(f"{s:.3g}" for s in retry),
                             "templates": templates, "rate": rate}
    port = free_port()
    url = f"http://127.0.0.1:{port}{HOOK_PATH}"
    ep = endpoint(url, retry, timeout_s, batch)
    log_path = Path(folder) / "outage.log"
    received = Received(SECRET)
    receiver = None
    with client.start(templates=templates, latency_ms=20, rate=rate * 2, burst=burst) as hooked_site, \
            client.start(templates=templates, latency_ms=20, rate=rate * 2, burst=burst) as plain_site:
        db, env = seeded(folder, "outage", hooked_site, rate, burst, hook_config(folder, "outage", ep))
        plain_db, plain_env = seeded(folder, "plain", plain_site, rate, burst)
        start = time.time()
        hooked = start_run(env, workers, rate, burst, log_path)
        plain = start_run(plain_env, workers, rate, burst, log_path)
        try:
            time.sleep(outage_s / 2)                                # refusing connections
            receiver = client.start(kind="receiver", port=port, status=503)
            while time.time() < start + outage_s:                   # 503
                received.poll(receiver)
                time.sleep(min(5.0, max(0.0, start + outage_s - time.time())))
            end = time.time()
            receiver.answer(200)
            for run in (hooked, plain):
                while run.poll() is None:
                    received.poll(receiver)
                    time.sleep(0.2)
            figures["exits"] = (hooked.returncode, plain.returncode)
            figures["tail_s"] = deliver_to_the_end(db, env, ep, received, receiver, log_path,
                                                   max(retry) * (1 + JITTER) + 60)
        finally:
            stop(hooked)
            stop(plain)
            if receiver is not None:
                receiver.stop()
        hooked_times, plain_times = request_times(hooked_site), request_times(plain_site)
    # the outage as both crawls saw it: from the later of their first requests (the start-up of each is not
    # the crawl's pace) to its end
    crawling = max([start] + [t[0] for t in (hooked_times, plain_times) if t])
    hooked_rate, hooked_until = crawl_rate(hooked_times, crawling, end)
    plain_rate, plain_until = crawl_rate(plain_times, crawling, end)
    left, disabled, last_error = backlog(db, ep)
    stored = outbox(db)
    conn = store.connect(str(db))
    try:
        failed = deliveries.failures(conn, 100_000)
    finally:
        conn.close()
    ok = received.delivered()
    seqs = [e["seq"] for r in ok for e in r["events"]]
    first_ok = min((r["at"] for r in ok), default=None)
    figures.update(rate_window_s=min(hooked_until, plain_until) - crawling, rate_with_endpoint=hooked_rate,
                   rate_without=plain_rate, events=len(stored),
                   attempts_refused=sum(1 for f in failed if f["status"] is None),
                   attempts_503=sum(1 for f in failed if f["status"] == 503), requests=len(received.requests),
                   delivered_requests=len(ok),
                   first_delivery_after_outage_s=None if first_ok is None else first_ok - end,
                   backlog=left, disabled=disabled, unverified=len(received.unverified))
    if min(hooked_until, plain_until) < end - 1:
        failures.append("a crawl ran out of work before the outage ended: give more templates")
    if hooked_rate < 0.9 * plain_rate:
        failures.append(f"the crawl with the endpoint down made {hooked_rate:.2f} requests/s, the one without "
                        f"{plain_rate:.2f}")
    if left or disabled:
        failures.append(f"{left} event(s) not delivered after the outage (disabled: {disabled}, last error: "
                        f"{last_error})")
    if any(r["at"] < end for r in ok):
        failures.append("a request was answered 2xx during the outage (the stand-in did not go down)")
    if first_ok is not None and first_ok - end > max(retry) * (1 + JITTER) + 10:
        failures.append(f"the first delivery came {first_ok - end:.0f} s after the outage, later than the "
                        f"schedule's longest step ({max(retry):g} s) allows")
    if any(b <= a for a, b in zip(seqs, seqs[1:], strict=False)):
        failures.append("the events after the outage did not come in strictly increasing seq")
    if seqs != [e["seq"] for e in stored]:
        missing = sorted({e["seq"] for e in stored} - set(seqs))
        failures.append(f"the receiver got {len(seqs)} events of {len(stored)}: a gap "
                        f"(missing seq {missing[:5]})" if missing else "events the outbox does not hold")
    if received.unverified:
        failures.append(f"{len(received.unverified)} request(s) failed verification: {received.unverified[0]}")
    return figures, failures


# --- the command ---------------------------------------------------------------------------------

def report(name, figures, failures):
    say(f"== {name}")
    for k, v in figures.items():
        say(f"   {k}: {v:.2f}" if isinstance(v, float) else f"   {k}: {v}")
    for f in failures:
        say(f"   FAIL: {f}")
    say(f"   {'FAILED' if failures else 'passed'}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="kills,outage", help="comma-separated: kills, outage (default both)")
    parser.add_argument("--templates", type=int, default=3000, help="kills: templates of the run")
    parser.add_argument("--kills", type=int, default=20, help="kills: kill -9s of workers and of the delivery")
    parser.add_argument("--rate", type=float, default=20.0, help="kills: requests per second of the run")
    parser.add_argument("--batch", type=int, default=10, help="kills: events per request")
    parser.add_argument("--seed", type=int, default=1, help="kills: decides the moments and the targets")
    parser.add_argument("--receiver-delay-s", type=float, default=0.2,
                        help="kills: seconds the receiver takes to answer (a kill then often falls mid-attempt)")
    parser.add_argument("--outage-s", type=float, default=600.0,
                        help="outage: seconds the receiver is down (half refusing, half 503); the retry "
                             "schedule is compressed in proportion")
    parser.add_argument("--outage-rate", type=float, default=5.0, help="outage: requests per second of each run")
    parser.add_argument("--workdir", help="keep the databases and logs here (default: a temporary folder, deleted)")
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    if not chosen or set(chosen) - {"kills", "outage"}:
        parser.error("--only takes kills, outage or both")
    with tempfile.TemporaryDirectory(prefix="scraper-acceptance-") as tmp:
        folder = Path(args.workdir or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        failed = False
        if "kills" in chosen:
            figures, failures = kills_run(folder, args.templates, args.kills, args.rate, batch=args.batch,
                                          seed=args.seed, receiver_delay_s=args.receiver_delay_s)
            report("kills", figures, failures)
            failed |= bool(failures)
        if "outage" in chosen:
            figures, failures = outage_run(folder, args.outage_s, args.outage_rate)
            report("outage", figures, failures)
            failed |= bool(failures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
