"""Commands that publish the mirror: export, search, stats, report."""

import contextlib
import json
import os
import signal
import sys
import time

import click

from scraper.base import exitcodes, logs
from scraper.cli.common import Choice, Failure, command_settings, existing_db, stops_cleanly
from scraper.products import export, search

# formats written by their own modules: the raw answers, a folder of files, the Atom feed of changes
PUBLISHED = ("warc", "files", "atom")


@click.command("export")
@click.option("--format", "fmt", type=Choice(export.FORMATS + PUBLISHED), required=True, help="Output format.")
@click.option("--output", "-o", type=click.Path(),
              help="Write to this file (default: stdout; parquet and warc need a file, files a folder).")
@click.option("--columns", help="Comma-separated columns to export, in this order (default: all).")
@click.option("--no-redact", is_flag=True, help="Keep credentials as stored (by default they become [REDACTED]).")
@click.option("--live-only", is_flag=True, help="Leave out templates removed from n8n.io.")
@click.option("--source", "source_name", metavar="NAME",
              help="Export the items of this catalogue source instead of the templates (warc: only this source's "
                   "answers; atom: only this source's changes).")
@click.option("--since", help="warc: only answers fetched at or after this time (ISO 8601; no offset means UTC).")
@click.pass_context
def export_cmd(ctx, fmt, output, columns, no_redact, live_only, source_name, since):
    """Stream the workflows table as JSON Lines, JSON, CSV or Parquet (needs pyarrow: pip install
    'scraper[parquet]'); or publish the raw answers as a WARC file, or the templates as a folder of
    importable n8n workflow files.

    CSV is made for spreadsheets: formula-safe, without the workflow JSON unless --columns names it,
    and any cell over 32,767 characters cut with a visible mark.

    Credentials in the workflows (API keys, tokens, Authorization headers, passwords in URLs, pinData)
    are redacted unless --no-redact is given; stderr says how many.

    JSON Lines, JSON and Parquet give each template its `transcripts` (video_id, language_code,
    is_generated, text); CSV gives their texts joined in one `transcripts` cell.

    warc (needs warcio: pip install 'scraper[warc]') writes a WARC 1.1 file: a warcinfo record, then one
    response record per stored answer version, the payload exactly as served (raw answers are never
    redacted); --source, --since and --live-only choose which.

    atom writes an Atom feed of the newest 100 changes (new, changed, removed and restored templates and
    items, newest first; --source: one source's), each entry linking the template's page or the item's
    URL: what `scraper serve` answers at /changes.atom.

    files writes DIR/<id>-<slug>.json per live template (n8n's import shape), DIR/index.json and
    DIR/README.md, with stable bytes for git; it deletes only files the previous index.json lists. A
    signal stops it between two files (exit 130/143).

    \b
    Example:
        scraper export --format jsonl --output workflows.jsonl
        scraper export --format csv --columns id,name,author,quality_score > workflows.csv
        scraper export --format parquet --output workflows.parquet
        scraper export --source events --format csv > events.csv
        scraper export --format warc --output n8n.warc.gz --since 2026-11-01
        scraper export --format files --output templates/
        scraper export --format atom --output changes.atom

    With --source, each row is an item: source, key, url, version, first_seen_at, last_seen_at,
    removed_at and record (nested in JSON and JSON Lines; one `record.<field>` column each in CSV and
    Parquet).
    """
    s = command_settings(ctx)
    if since and fmt != "warc":
        raise Failure("--since goes with --format warc.")
    if fmt in PUBLISHED:
        if not output:
            raise Failure(f"--format {fmt} needs --output {'DIR' if fmt == 'files' else 'FILE'}.")
        if columns:
            raise Failure(f"--columns does not go with --format {fmt}.")
        if source_name and fmt == "files":
            raise Failure("--source does not go with --format files (the files are n8n's templates).")
        if fmt == "atom" and (live_only or no_redact):
            raise Failure(f"{'--live-only' if live_only else '--no-redact'} does not go with --format atom (a feed of "
                          "changes names removals and holds no workflow).")
        if fmt == "files":
            return _published(s, fmt, output, not no_redact, live_only, source_name, since)
        with stops_cleanly("export"):
            return _published(s, fmt, output, not no_redact, live_only, source_name, since)
    if output and os.path.isdir(output):
        raise Failure(f"--output {output} is a folder; give a file name.")
    if source_name is not None:
        with stops_cleanly("export", None if output else "what went to stdout is incomplete"):
            return _export_items(s, fmt, output, columns, live_only, source_name)
    with stops_cleanly("export", None if output else "what went to stdout is incomplete"), existing_db(s) as conn:
        chosen = export.choose_columns(conn, columns, fmt)
        if output:
            summary = export.write_file(conn, fmt, output, chosen, redact=not no_redact, live_only=live_only)
            click.echo(logs.stamped(f"exported {summary.rows} workflow(s) to {output}; "
                                    f"{summary.describe(not no_redact)}"), err=True)
        else:
            summary = export.write(conn, fmt, sys.stdout, chosen, redact=not no_redact, live_only=live_only)
            sys.stdout.flush()      # the data first, then the line about it
            click.echo(logs.stamped(f"exported {summary.rows} workflow(s); {summary.describe(not no_redact)}"),
                       err=True)


def _export_items(s, fmt, output, columns, live_only, source_name):
    from scraper.products import export_items
    if columns is not None:
        raise Failure("--columns applies to the templates; an item export has every field of its source.")
    with existing_db(s) as conn:
        export_items.check_source(conn, source_name)
        if output:
            summary = export_items.write_file(conn, fmt, output, source_name, live_only)
            click.echo(logs.stamped(f"exported {summary.rows} item(s) of {source_name} to {output}."), err=True)
        else:
            summary = export_items.write(conn, fmt, sys.stdout, source_name, live_only)
            sys.stdout.flush()
            click.echo(logs.stamped(f"exported {summary.rows} item(s) of {source_name}."), err=True)


def _published(s, fmt, output, redact, live_only, source, since):
    from scraper.mirror import sync
    if since is not None:
        try:
            since = sync.parse_time(since)
        except ValueError:
            raise Failure(f"--since {since!r} is not an ISO 8601 time (e.g. 2026-11-25 or 2026-11-25T02:00:00Z).") \
                from None
    with existing_db(s) as conn:
        if fmt == "atom":
            from scraper.products import atom
            if os.path.isdir(output):
                raise Failure(f"--output {output} is a folder; give a file name such as changes.atom.")
            entries = atom.write_file(conn, output, s.site_url, source)
            click.echo(logs.stamped(f"exported the newest {entries} change(s) as an Atom feed to {output}."), err=True)
            return
        if fmt == "warc":
            from scraper.products import warc
            if os.path.isdir(output):
                raise Failure(f"--output {output} is a folder; give a file name such as mirror.warc.gz.")
            summary = warc.write_file(conn, output, (s.api_url, s.site_url), source, since, live_only)
            click.echo(logs.stamped(f"exported {summary.describe()[:-1]} to {output}."), err=True)
            return
        from scraper.products import files
        if os.path.exists(output) and not os.path.isdir(output):
            raise Failure(f"--output {output} is a file, not a folder; name a folder (made when missing).")
        with _stop_on_signal() as stop:
            summary = files.write(conn, output, redact=redact, stop=stop)
        if summary.stopped:
            code = exitcodes.SIGINT if summary.stopped == "SIGINT" else exitcodes.SIGTERM
            raise Failure(f"stopped by {summary.stopped} after changing {summary.changed} file(s) in {output}; "
                          f"export again to finish.", code)
        click.echo(logs.stamped(f"exported to {output}: {summary.describe()}"), err=True)


@contextlib.contextmanager
def _stop_on_signal():
    """`with _stop_on_signal() as stop:` SIGINT and SIGTERM only set a flag; `stop()` returns its name."""
    got = []
    handler = lambda signum, frame: got.append(signal.Signals(signum).name)  # noqa: E731 - a one-line handler
    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield lambda: got[0] if got else None
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)



@click.command("search")
@click.argument("query")
@click.option("--limit", type=click.IntRange(min=1), default=search.LIMIT, show_default=True,
              help="At most this many templates.")
@click.option("--json", "as_json", is_flag=True, help="A JSON array of {id, name, snippet, rank, source} (templates) "
              "and {key, source, url, name, snippet, rank} (items) instead of text.")
@click.option("--source", "source_name", metavar="NAME",
              help="Search the items of this catalogue source instead (JSON gives each its `key`).")
@click.pass_context
def search_cmd(ctx, query, limit, as_json, source_name):
    """Full-text search of the stored templates (name, description, explainer, node types, categories,
    author, video transcripts), best match first (bm25; `rank` is lower for a better match), with snippets;
    and of the items of every catalogue source the database holds (each row names its `source`).

    QUERY: words (all must match), "a phrase", a OR b, a NOT b (not -b), prefix*, and column:word for
    one column (name, description, explainer, node_types, categories, author, transcripts); a word with
    punctuation in double quotes ("n8n-nodes-base.slack").

    \b
    Example:
        scraper search slack
        scraper search 'telegram AND openai' --limit 5
        scraper search 'node_types:googleSheets' --json | jq '.[].id'
        scraper search jazz          # templates and every catalogue source's items
    """
    s = command_settings(ctx)
    if source_name is not None:
        with existing_db(s) as conn:
            search.check_source(conn, source_name, s.sources)
            results = search.query_items(conn, source_name, query, limit)
        click.echo(json.dumps(results, indent=2, ensure_ascii=False) if as_json
                   else search.render_items(source_name, query, results))
        return
    with existing_db(s) as conn:
        found = search.everything(conn, query, limit, with_total=not as_json)
    if as_json:
        click.echo(json.dumps((found["templates"] or []) + found["items"], indent=2, ensure_ascii=False))
    else:
        click.echo(search.render_everything(query, found))


@click.command("stats")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (every row of every ranking) instead of text.")
@click.pass_context
def stats_cmd(ctx, as_json):
    """Statistics of the stored templates: node types and categories by the number of templates that
    use them, authors, templates created per month, quality scores, videos and transcript coverage; and
    each catalogue source's items and the fields their records carry (only those, on a catalogue-only
    database).

    \b
    Example:
        scraper stats
        scraper stats --json | jq '.node_types[:10]'
    """
    from scraper.products import scope, stats
    s = command_settings(ctx)
    with existing_db(s) as conn:
        report = stats.report(conn)
        report["sources"] = stats.sources(conn)
        n8n = scope.of(conn, s).n8n
    click.echo(json.dumps(report, indent=2, ensure_ascii=False) if as_json else stats.render(report, n8n=n8n))


@click.command("report")
@click.option("--output", "-o", type=click.Path(dir_okay=False), required=True, help="The HTML file to write.")
@click.option("--run", "run_id", type=int, help="The run whose time charts to show (default: the latest).")
@click.pass_context
def report_cmd(ctx, output, run_id):
    """Write one self-contained HTML page (no network needed to view it) with charts: templates done over
    time, request rate against the limit, errors by kind, answer latency, quality scores, top node types
    and the history of runs.

    \b
    Example:
        scraper report --output report.html
        scraper report --run 3 -o run3.html
    """
    from scraper.products import report
    s = command_settings(ctx)
    with stops_cleanly("report"), existing_db(s) as conn:
        size = report.write(conn, output, time.time(), run_id, settings=s)
    click.echo(logs.stamped(f"wrote the report to {output} ({size / 1024:.0f} KB)."), err=True)
