"""Commands that push the outbox out: deliver (to the [[webhook]] endpoints), redeliver (what they took, again)
and deliveries (where each is)."""

import json
import time

import click

from scraper.base import exitcodes
from scraper.cli.common import Failure, command_settings, existing_db, say, stops_cleanly

FAILURES_SHOWN = 10


def _endpoints(s):
    try:
        import cloudevents  # noqa: F401 - only to say what to install, before anything is sent
        import standardwebhooks  # noqa: F401
    except ImportError:
        raise Failure("webhooks need the standardwebhooks and cloudevents packages: pip install "
                      "'scraper[webhooks]'.") from None
    if not s.webhooks and not s.etl_url:
        raise Failure("no webhook endpoint is configured; add a [[webhook]] table (url, secret = \"${NAME}\") to "
                      "scraper.toml (or set etl_url).")
    return s.webhooks


def _shown(s):
    """The URLs of every endpoint as `deliveries` shows them: the webhooks', then the ETL API's."""
    from scraper.mirror import etl
    return [e.shown for e in s.webhooks] + ([etl.endpoint(s).shown] if s.etl_url else [])


@click.command("deliver")
@click.option("--follow", is_flag=True, help="Keep delivering new events as they come, until Ctrl-C.")
@click.pass_context
def deliver_cmd(ctx, follow):
    """Send the outbox's events to every [[webhook]] endpoint: in order, in batches, signed (Standard
    Webhooks), as CloudEvents; an endpoint's cursor moves only over a 2xx, and a failed batch is retried on
    the endpoint's schedule with the same id and bytes. With etl_url, the runs go to the ETL API the same
    way. Without --follow, stops when nothing is due.

    \b
    Example:
        HOOK_SECRET=whsec_... scraper deliver
        scraper deliver --follow
    """
    from scraper.db import deliveries
    from scraper.mirror import delivery, etl
    s = command_settings(ctx)
    endpoints = _endpoints(s)
    with existing_db(s) as conn:
        etl.begin(conn, s)
        reporter = etl.Reporter.of(conn, s)
        with stops_cleanly("deliver", partial="every attempt made is recorded"):
            made = delivery.deliver(conn, endpoints, follow=follow,
                                    etl=None if reporter is None else (etl.endpoint(s), reporter))
        report = deliveries.report(conn, _shown(s), time.time())
    sent = sum(a["events"] for a in made if a["ok"])
    failed = [a for a in made if not a["ok"]]
    say(f"delivered {sent} event(s) in {len(made) - len(failed)} request(s); {len(failed)} attempt(s) failed.")
    for e in report:
        if e["disabled"] or e["backlog"]:
            say(f"{e['url']}: {'disabled, ' if e['disabled'] else ''}{e['backlog']} event(s) waiting"
                + (f" ({e['last_error']})" if e["last_error"] else ""))


@click.command("redeliver")
@click.option("--since", type=click.IntRange(min=0), metavar="SEQ",
              help="The batches with an event after this seq (0: every batch delivered).")
@click.option("--run", "run_id", type=click.IntRange(min=1), metavar="ID",
              help="The batches with an event of this run.")
@click.pass_context
def redeliver_cmd(ctx, since, run_id):
    """Send again what the [[webhook]] endpoints already took: the same events in the same batches, so the same
    webhook-id and bytes (while the endpoint's configuration is unchanged). Their cursors stay as they are.

    \b
    Example:
        scraper redeliver --since 1200
        scraper redeliver --run 42
    """
    from scraper.mirror import delivery
    if (since is None) == (run_id is None):
        raise Failure("give one of --since SEQ or --run ID.")
    s = command_settings(ctx)
    endpoints = _endpoints(s)
    with existing_db(s) as conn:
        with stops_cleanly("redeliver", partial="every attempt made is recorded"):
            made = delivery.redeliver(conn, endpoints, time.time(), since, run_id)
    failed = [a for a in made if not a["ok"]]
    say(f"redelivered {sum(a['events'] for a in made if a['ok'])} event(s) in {len(made) - len(failed)} "
        f"request(s); {len(failed)} failed.")
    for a in failed:
        say(f"{a['url']}: {a['error']}")
    if failed:
        raise click.exceptions.Exit(exitcodes.FAILED)


@click.command("deliveries")
@click.option("--json", "as_json", is_flag=True, help="One JSON object {endpoints, failures} instead of text.")
@click.pass_context
def deliveries_cmd(ctx, as_json):
    """Each webhook endpoint: its cursor, backlog, the age of its oldest undelivered event, its last error and
    whether it is disabled; then the newest failed attempts.

    \b
    Example:
        scraper deliveries
        scraper deliveries --json
    """
    from scraper.db import deliveries
    s = command_settings(ctx)
    _endpoints(s)
    with existing_db(s) as conn:
        report = deliveries.report(conn, _shown(s), time.time())
        failures = deliveries.failures(conn, FAILURES_SHOWN)
    if as_json:
        click.echo(json.dumps({"endpoints": report, "failures": failures}, indent=2))
        return
    for e in report:
        click.echo(f"{e['url']}  cursor {e['cursor']}  backlog {e['backlog']}"
                   + (f"  oldest {e['oldest_s']} s" if e["oldest_s"] is not None else "")
                   + ("  DISABLED" if e["disabled"] else "") + (f"  last error: {e['last_error']}"
                                                                 if e["last_error"] else ""))
    for f in failures:
        click.echo(f"  failed: {f['url']} seq {f['first_seq']}-{f['last_seq']} ({f['events']} event(s)) "
                   f"{f['status'] or 'no answer'}: {f['error']}")
