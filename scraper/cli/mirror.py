"""Commands that keep the mirror current and read its history: refresh, changes, history, reextract."""

import json
import time

import click

from scraper.base import exitcodes, settings
from scraper.base.errors import ConfigError, ParseError
from scraper.cli.common import Choice, Failure, command_settings, existing_db, say, stops_cleanly

CHANGE_KINDS = ("added", "changed", "removed", "restored")


@click.command("refresh")
@click.option("--older-than", "older_than_days", type=click.IntRange(min=0), default=settings.REFRESH_DAYS,
              show_default=True, help="Queue templates last fetched more than this many days ago (0: all).")
@click.option("--limit", type=click.IntRange(min=1), help="Queue at most this many, the oldest first.")
@click.option("--source", "source_name", metavar="NAME",
              help="Queue the items of this catalogue source instead of the templates.")
@click.pass_context
def refresh_cmd(ctx, older_than_days, limit, source_name):
    """Queue done templates for a re-fetch, oldest first: catches edits the listing does not show
    (a changed workflow JSON). The next `scraper run` fetches them; a changed one gets a new version.

    \b
    Example:
        scraper refresh --older-than 30 --limit 500 && scraper run
    """
    from scraper.mirror import items, sync
    s = command_settings(ctx)
    with existing_db(s) as conn:
        now = time.time()
        if source_name is not None:
            n = items.refresh(conn, source_name, older_than_days, limit, now)
            say(f"queued {n} item(s) of {source_name} for a re-fetch.")
            return
        n = sync.refresh(conn, older_than_days, limit, now)
        why = "" if n else f": {sync.why_none_due(conn, older_than_days, now)}"
    say(f"queued {n} template(s) for a re-fetch{why}.")


@click.command("changes")
@click.option("--since", help="Only changes at or after this time (ISO 8601; no offset means UTC).")
@click.option("--limit", type=click.IntRange(min=1),
              help="Only the newest N (still printed oldest first); with --after, at most N events a page.")
@click.option("--kind", "kinds", multiple=True, type=Choice(CHANGE_KINDS),
              help="Only changes of this kind; repeatable.")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON array instead of text; with --after, one JSON object {changes, next} (a line a page "
                   "with --follow).")
@click.option("--after", type=click.IntRange(min=0), metavar="CURSOR",
              help="The event feed instead: the events after this cursor (a `next` printed before; 0: from the "
                   "start), each with seq, id, type, source, subject, occurred_at, data.")
@click.option("--follow", is_flag=True, help="The event feed, and keep printing new events as they come (Ctrl-C "
                                             "stops).")
@click.option("--compact", is_flag=True,
              help="The event feed compacted: only the newest event of each template, item, job and run (a "
                   "removal is its tombstone), so an old cursor resyncs quickly.")
@click.option("--type", "types", multiple=True, metavar="TYPE",
              help="The event feed: only events of this type (template.updated) or family (template.*); "
                   "repeatable.")
@click.pass_context
def changes_cmd(ctx, since, limit, kinds, as_json, after, follow, compact, types):
    """List what changed, oldest first (then by template id): added, changed (a new version), removed,
    restored. With --after, --follow or --compact: the event feed instead, read by cursor (the events of
    templates, catalogue items, failed jobs and runs, in the order they were committed); store the `next`
    it prints and pass it back as --after to read on, never missing or repeating one.

    \b
    Example:
        scraper changes --since 2026-11-01
        scraper changes --limit 5 --kind added --kind restored
        scraper changes --since 2026-11-25T02:00:00Z --json
        scraper changes --after 0 --limit 500 --json
        scraper changes --after 1234 --follow --type 'template.*'
        scraper changes --compact --json
    """
    if after is not None or follow or compact:
        if since is not None or kinds:
            raise Failure("--since and --kind read the changes by time; with --after, --follow or --compact use "
                          "--type to choose events.")
        _feed(ctx, after or 0, limit, compact, types, follow, as_json)
        return
    if types:
        raise Failure("--type chooses events of the feed; give --after CURSOR (0: from the start) with it.")
    from scraper.db import sources_report
    from scraper.mirror import answers, sync
    try:
        since = None if since is None else sync.parse_time(since)
    except ValueError:
        raise Failure(f"--since {since!r} is not an ISO 8601 time (e.g. 2026-11-25 or 2026-11-25T02:00:00Z).") \
            from None
    s = command_settings(ctx)
    with existing_db(s) as conn:
        found = answers.changes(conn, since, kinds, limit)
        templates, items = sources_report.names(
            conn, [c["id"] for c in found if "id" in c],
            [(c["source"], c["key"].split(":", 1)[1]) for c in found if "id" not in c])
    for c in found:     # each change names what it is about (a removed one keeps its stored name)
        c["name"] = (templates.get(c["id"]) if "id" in c
                     else items.get((c["source"], c["key"].split(":", 1)[1])))
    if as_json:
        click.echo(json.dumps(found, indent=2, ensure_ascii=False))
    else:
        for c in found:
            click.echo(f"{c['at']}  {c['change']:<8}  {c['id'] if 'id' in c else c['key']}"
                       + (f"  {c['name']}" if c["name"] else ""))


def _feed(ctx, after, limit, compact, types, follow, as_json):
    """`changes --after`: one page of the event feed, or every page as it comes (`follow`)."""
    from scraper.mirror import feed
    try:
        types = feed.check_types(types)
    except ConfigError as e:
        raise Failure(str(e)) from None
    s = command_settings(ctx)
    with existing_db(s) as conn:
        if not follow:
            _print_page(feed.page(conn, after, limit, compact, types), as_json)
            return
        with stops_cleanly("changes --follow", partial="every event printed was whole"):
            for got in feed.follow(conn, after, limit, compact, types):
                _print_page(got, as_json, lines=True)


def _print_page(got, as_json, lines=False):
    """A page of events: one JSON object (a line of its own with `lines`), or a line each and the cursor to
    stderr (so the events alone can be piped)."""
    if as_json:
        click.echo(json.dumps(got, ensure_ascii=False, separators=(",", ":")) if lines
                   else json.dumps(got, indent=2, ensure_ascii=False))
        return
    for e in got["changes"]:
        click.echo(f"{e['seq']}  {e['occurred_at']}  {e['type']:<17}  {e['source']}  {e['subject']}")
    click.echo(f"next: {got['next']}", err=True)


@click.command("history")
@click.argument("key", metavar="KEY")
@click.option("--json", "as_json", is_flag=True, help="One JSON array instead of text.")
@click.pass_context
def history_cmd(ctx, key, as_json):
    """List the stored versions of one template or catalogue item, oldest first. KEY is a template id, a
    job key as `failures` prints it (n8n:ID), a workflow URL (as in a `seed --ids` file), or an item's
    SOURCE:URL or SOURCE:/path.

    \b
    Example:
        scraper history 1234
        scraper history n8n:1234 --json
        scraper history events:/events/jazz-night-42
    """
    from scraper.mirror import answers, items
    from scraper.sites import n8n
    s = command_settings(ctx)
    name, sep, rest = key.partition(":")
    template_id = None
    if key.isdigit() or name == n8n.SITE or key.startswith(("http://", "https://")) or not sep:
        try:
            template_id = n8n.parse_id_line(key, s.site_url)
        except ParseError as e:
            raise Failure(f"{key!r} {e}; give a template id, n8n:ID, a workflow URL or SOURCE:URL-or-path.") from None
        if template_id is None:
            raise Failure("give a template id, n8n:ID, a workflow URL or SOURCE:URL-or-path.")
        what = f"template {template_id}"
    elif rest:
        what = f"item {key}"
    else:
        raise Failure(f"{key!r} is neither a template id nor SOURCE:URL-or-path (e.g. events:/events/jazz-night-42).")
    with existing_db(s) as conn:
        if template_id is not None:
            versions = answers.history(conn, template_id)
        else:
            found = items.find_key(conn, name, rest)
            versions = [] if found is None else items.history(conn, name, found)
    if not versions:
        hint = ("" if template_id is not None
                else " (KEY is a template id, n8n:ID, a workflow URL or SOURCE:URL-or-path)")
        raise Failure(f"{what} has no stored version{hint}.")
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
    from scraper.mirror import answers, items
    from scraper.sites import catalogue
    s = command_settings(ctx)
    sources = {src.name: src for src in s.sources if src.kind == catalogue.SITE}
    with existing_db(s) as conn:
        try:
            rebuilt, without = answers.reextract(conn)
            rebuilt_items, skipped = items.reextract(conn, sources, catalogue.extract)
        except ParseError as e:
            raise Failure(f"a stored answer cannot be extracted any more ({e}); nothing after it was rebuilt.",
                          exitcodes.FAILED) from None
    extra = f"; {without} stored before answers were kept, left as they are" if without else ""
    say(f"rebuilt {rebuilt} workflow row(s) from stored answers{extra}.")
    if rebuilt_items or skipped:
        say(f"rebuilt {rebuilt_items} catalogue item(s) from stored pages"
             + (f"; {skipped} of sources not in the sources file left as they are." if skipped else "."))


@click.command("migrate")
@click.option("--to", "to_url", required=True, metavar="URL",
              help="The empty PostgreSQL database to copy into: postgresql://USER@HOST:PORT/DB.")
@click.pass_context
def migrate_cmd(ctx, to_url):
    """Copy this SQLite mirror (--db) into an empty PostgreSQL database: jobs, templates, answers,
    versions, domains, runs and every other table. It refuses a target that holds any row. A run can
    then continue on the PostgreSQL database (`--db URL`) where the SQLite one stopped.

    \b
    Example:
        PGPASSWORD=... scraper --db jobs.db migrate --to postgresql://scraper@db.example.org:5432/scraper
    """
    from scraper.base.urls import is_db_url, redact_db_url
    from scraper.db import copy
    s = command_settings(ctx)
    if s.postgres:
        raise Failure("migrate copies a SQLite file: give its path with --db, and the PostgreSQL URL with --to.")
    if not is_db_url(to_url):
        raise Failure(f"--to must be a PostgreSQL URL (postgresql://USER@HOST:PORT/DB), not {to_url!r}.")
    with existing_db(s):
        pass                     # refuses a missing or damaged SQLite file with its sentence
    try:
        copied = copy.copy(s.db_path, to_url)
    except ConfigError as e:
        raise Failure(str(e)) from None
    detail = ", ".join(f"{table} {n}" for table, n in copied.items() if n)
    say(f"copied {sum(copied.values())} row(s) from {len(copied)} table(s) to {redact_db_url(to_url)}"
         f"{': ' + detail if detail else ''}.")
