"""Commands that keep the mirror current and read its history: refresh, changes, history, reextract."""

import json
import time

import click

from scraper.base import exitcodes, settings
from scraper.base.errors import ParseError
from scraper.cli.common import Choice, Failure, _existing_db, _say, _settings

CHANGE_KINDS = ("added", "changed", "removed", "restored")


@click.command("refresh")
@click.option("--older-than", "older_than_days", type=click.IntRange(min=0), default=settings.REFRESH_DAYS,
              show_default=True, help="Queue templates last fetched more than this many days ago (0: all).")
@click.option("--limit", type=click.IntRange(min=1), help="Queue at most this many, the oldest first.")
@click.pass_context
def refresh_cmd(ctx, older_than_days, limit):
    """Queue done templates for a re-fetch, oldest first: catches edits the listing does not show
    (a changed workflow JSON). The next `scraper run` fetches them; a changed one gets a new version.

    \b
    Example:
        scraper refresh --older-than 30 --limit 500 && scraper run
    """
    from scraper.mirror import sync
    s = _settings(ctx)
    with _existing_db(s) as conn:
        now = time.time()
        n = sync.refresh(conn, older_than_days, limit, now)
        why = "" if n else f": {sync.why_none_due(conn, older_than_days, now)}"
    _say(f"queued {n} template(s) for a re-fetch{why}.")


@click.command("changes")
@click.option("--since", help="Only changes at or after this time (ISO 8601; no offset means UTC).")
@click.option("--limit", type=click.IntRange(min=1), help="Only the newest N (still printed oldest first).")
@click.option("--kind", "kinds", multiple=True, type=Choice(CHANGE_KINDS),
              help="Only changes of this kind; repeatable.")
@click.option("--json", "as_json", is_flag=True, help="One JSON array instead of text.")
@click.pass_context
def changes_cmd(ctx, since, limit, kinds, as_json):
    """List what changed, oldest first (then by template id): added, changed (a new version), removed,
    restored.

    \b
    Example:
        scraper changes --since 2026-11-01
        scraper changes --limit 5 --kind added --kind restored
        scraper changes --since 2026-11-25T02:00:00Z --json
    """
    from scraper.mirror import answers, sync
    try:
        since = None if since is None else sync.parse_time(since)
    except ValueError:
        raise Failure(f"--since {since!r} is not an ISO 8601 time (e.g. 2026-11-25 or 2026-11-25T02:00:00Z).") \
            from None
    s = _settings(ctx)
    with _existing_db(s) as conn:
        found = answers.changes(conn, since, kinds, limit)
    if as_json:
        click.echo(json.dumps(found, indent=2))
    else:
        for c in found:
            click.echo(f"{c['at']}  {c['change']:<8}  {c['id']}")


@click.command("history")
@click.argument("template", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="One JSON array instead of text.")
@click.pass_context
def history_cmd(ctx, template, as_json):
    """List the stored versions of one template, oldest first. ID is a template id, a job key as
    `failures` prints it (n8n:ID) or a workflow URL, as in a `seed --ids` file.

    \b
    Example:
        scraper history 1234
        scraper history n8n:1234 --json
    """
    from scraper.mirror import answers
    from scraper.sites import n8n
    s = _settings(ctx)
    try:
        template_id = n8n.parse_id_line(template, s.site_url)
    except ParseError as e:
        raise Failure(f"{template!r} {e}; give a template id, n8n:ID or a workflow URL.") from None
    if template_id is None:
        raise Failure("give a template id, n8n:ID or a workflow URL.")
    with _existing_db(s) as conn:
        versions = answers.history(conn, template_id)
    if not versions:
        raise Failure(f"template {template_id} has no stored version.")
    if as_json:
        click.echo(json.dumps(versions, indent=2))
    else:
        for v in versions:
            click.echo(f"version {v['version']}  {v['fetched_at']}  {v['content_hash']}")


@click.command("reextract")
@click.pass_context
def reextract_cmd(ctx):
    """Rebuild every workflows row from the stored answers, sending no request (after an extractor fix).

    \b
    Example:
        scraper reextract
    """
    from scraper.mirror import answers
    s = _settings(ctx)
    with _existing_db(s) as conn:
        try:
            rebuilt, without = answers.reextract(conn)
        except ParseError as e:
            raise Failure(f"a stored answer cannot be extracted any more ({e}); nothing after it was rebuilt.",
                          exitcodes.FAILED) from None
    extra = f"; {without} stored before answers were kept, left as they are" if without else ""
    _say(f"rebuilt {rebuilt} workflow row(s) from stored answers{extra}.")


COMMANDS = (refresh_cmd, changes_cmd, history_cmd, reextract_cmd,)
