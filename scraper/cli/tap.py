"""`scraper tap`: the mirror as a Singer tap (products/tap.py; the Singer SDK, an optional extra, is imported
only here, when the command runs)."""

import click

from scraper.base.errors import ConfigError
from scraper.cli.common import Failure, command_settings, existing_db


@click.command("tap")
@click.option("--state", "state_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="Resume after the bookmarks of this state (a JSON object: the last STATE line a target echoed).")
@click.option("--discover", is_flag=True, help="Print the catalog (the streams and their schemas) instead of syncing.")
@click.pass_context
def tap_cmd(ctx, state_path, discover):
    """Emit the mirror as a Singer tap: SCHEMA, RECORD and STATE messages on stdout, one JSON object a line,
    for the streams templates, versions, items, runs and changes (logs on stderr). Each stream's bookmark is
    the outbox's seq, read strictly after it: a rerun with the saved state and no change emits no RECORD.
    A removed template or item comes as its tombstone (removed_at set). Needs the Singer SDK:
    pip install 'scraper[tap]'. Meltano runs the same tap as `tap-scraper` (docs/reference.md).

    \b
    Example:
        scraper tap > messages.jsonl
        scraper tap | target-jsonl --config target.json | tail -1 > state.json
        scraper tap --state state.json | target-jsonl --config target.json
        scraper tap --discover > catalog.json
    """
    s = command_settings(ctx)
    try:
        from scraper.products import tap
    except ImportError:
        raise Failure("`scraper tap` needs the Singer SDK: pip install 'scraper[tap]'.") from None
    state = {}
    if state_path is not None:
        try:
            with open(state_path, encoding="utf-8") as f:
                state = tap.state_of(f.read(), state_path)
        except OSError as e:
            raise Failure(f"cannot read --state {state_path} ({e.strerror or e}).") from None
        except ConfigError as e:
            raise Failure(str(e)) from None
    with existing_db(s) as conn:
        # the connection is given: the config's `db` only names it (shown without a password)
        singer = tap.TapScraper(config={"db": s.db_shown}, state=state, conn=conn)
        if discover:
            singer.run_discovery()
        else:
            singer.sync()


def singer_main():
    """`tap-scraper`: the same tap under the SDK's own command line (--config FILE with `db`, --state, --catalog,
    --discover, --about), as Meltano runs an extractor; a mistake is one sentence and exit 2, not a traceback."""
    try:
        from scraper.products import tap
    except ImportError:
        raise SystemExit("Error: tap-scraper needs the Singer SDK: pip install 'scraper[tap]'.") from None
    try:
        tap.TapScraper.cli()
    except ConfigError as e:
        click.echo(f"Error: {e}", err=True)
        raise SystemExit(2) from None
