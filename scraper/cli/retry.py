"""`scraper retry`: finished-but-unsuccessful rows back to pending."""

import click

from scraper.cli.common import command_settings, existing_db, say


@click.command("retry")
@click.option("--failed", is_flag=True, help="Rows that ended failed (the default when no flag is given).")
@click.option("--invalid", is_flag=True, help="Rows that ended invalid (404/410).")
@click.option("--all", "all_", is_flag=True, help="Both failed and invalid rows.")
@click.pass_context
def retry_cmd(ctx, failed, invalid, all_):
    """Move finished-but-unsuccessful rows back to pending, their attempts reset. The flags add up:
    `--failed --invalid` moves both.

    \b
    Example (cron, before the run):
        scraper retry --failed; scraper run
    """
    from scraper.db.queue import Queue
    s = command_settings(ctx)
    statuses = tuple(name for name, on in (("failed", failed or all_ or not invalid), ("invalid", invalid or all_))
                     if on)
    with existing_db(s) as conn:
        n = Queue(conn).retry(statuses)
    say(f"moved {n} {'/'.join(statuses)} job(s) back to pending.")
