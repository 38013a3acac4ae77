"""The `scraper` command: thin click commands over the library, one module per group of commands.

Only what every command needs is imported at start-up: each command imports its own modules when it
runs, so a quick command (`status`) does not pay for requests, psutil, pyrate-limiter, sqlite-utils or
the sites.
"""

import click

from scraper import __version__
from scraper.base import logs, settings
from scraper.cli import jobs, mirror, products, reading
from scraper.cli.common import Group


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--db", "db_path", envvar=settings.ENV_DB, default=settings.DB_PATH, show_default=True,
              help=f"The database of jobs and results: a SQLite file's path, or a PostgreSQL URL "
                   f"postgresql://USER@HOST:PORT/DB (many machines; password from PGPASSWORD or ~/.pgpass) "
                   f"[env {settings.ENV_DB}].")
@click.option("--api-url", envvar=settings.ENV_API_URL, default=settings.API_URL, show_default=True,
              help=f"Base URL of the n8n template API [env {settings.ENV_API_URL}].")
@click.option("--site-url", envvar=settings.ENV_SITE_URL, default=settings.SITE_URL, show_default=True,
              help=f"Base URL of the n8n.io site [env {settings.ENV_SITE_URL}].")
@click.option("--user-agent", envvar=settings.ENV_USER_AGENT, default=settings.USER_AGENT, show_default=True,
              help=f"The User-Agent header; add a contact address, e.g. 'scraper/{__version__} "
                   f"(+mailto:you@example.org)' [env {settings.ENV_USER_AGENT}].")
@click.option("--youtube-url", envvar=settings.ENV_YOUTUBE_URL, default=settings.YOUTUBE_URL, show_default=True,
              help=f"Where requests for https://www.youtube.com go, same path and query "
                   f"[env {settings.ENV_YOUTUBE_URL}].")
@click.option("--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
              default="INFO", show_default=True, help="How much to log on stderr.")
@click.version_option(__version__, prog_name="scraper")
@click.pass_context
def main(ctx, db_path, api_url, site_url, user_agent, youtube_url, log_level):
    """Collect the n8n.io workflow library into one SQLite file, politely and resumably.

    \b
    Example:
        scraper seed --from-search
        scraper run --workers 4
        scraper status
    """
    logs.setup(log_level.upper())
    ctx.obj = {"db_path": db_path, "api_url": api_url, "site_url": site_url, "user_agent": user_agent,
               "youtube_url": youtube_url}



for _module in (jobs, reading, mirror, products):
    for _command in _module.COMMANDS:
        main.add_command(_command)
