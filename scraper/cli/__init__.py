"""The `scraper` command: thin click commands over the library, one module per group of commands.

Only what every command needs is imported at start-up: each command imports its own modules when it
runs, so a quick command (`status`) does not pay for requests, psutil, pyrate-limiter, sqlite-utils or
the sites.
"""

import click

from scraper import __version__
from scraper.base import logs, settings, sources
from scraper.cli import discover, jobs, mirror, products, reading, serving, update
from scraper.cli.common import Choice, Group


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
@click.option("--sources", "sources_path", envvar=sources.ENV_SOURCES, type=click.Path(dir_okay=False),
              help=f"The sources file: one [[source]] table per site to mirror; without it, ./"
                   f"{sources.DEFAULT_PATH} when that exists, else the built-in n8n source "
                   f"[env {sources.ENV_SOURCES}].")
@click.option("--browser-path", envvar=settings.ENV_BROWSER, default=settings.BROWSER, show_default=True,
              help=f"The Chromium that sources with fetcher browser or auto use: a path, or a name found on PATH; "
                   f"nothing is ever downloaded [env {settings.ENV_BROWSER}].")
@click.option("--browser-timeout", "browser_timeout_s", type=float, default=None,
              help="Seconds one page may take in the browser, loading and settling (default: --timeout).")
@click.option("--log-level", type=Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
              default="INFO", show_default=True, help="How much to log on stderr.")
@click.version_option(__version__, prog_name="scraper")
@click.pass_context
def main(ctx, db_path, api_url, site_url, user_agent, youtube_url, sources_path, browser_path, browser_timeout_s,
         log_level):
    """Collect the n8n.io workflow library into one SQLite file, politely and resumably.

    \b
    Example:
        scraper seed --from-search
        scraper run --workers 4
        scraper status
    """
    logs.setup(log_level.upper())
    ctx.obj = {"db_path": db_path, "api_url": api_url, "site_url": site_url, "user_agent": user_agent,
               "youtube_url": youtube_url, "sources_path": sources.default_path(sources_path),
               "browser_path": browser_path, "browser_timeout_s": browser_timeout_s}



for _module in (jobs, update, reading, mirror, products, serving, discover):
    for _command in _module.COMMANDS:
        main.add_command(_command)
