"""The `scraper` command: thin click commands over the library, one module per command or concept.

Start-up imports only click and the settings' declarations: each command's module is imported when that
command runs (`Group.lazy`), and imports its own heavy modules inside the command, so a quick command
(`status`) pays for none of requests, psutil, sqlite-utils or the sites.
"""

import os

import click

from scraper import __version__
from scraper.base import config, logs, settings
from scraper.base.errors import ConfigError
from scraper.cli.common import Group, layered_values, log, root_options, setting_options

COMMANDS = {
    "seed": "scraper.cli.seed:seed_cmd",
    "run": "scraper.cli.run:run_cmd",
    "retry": "scraper.cli.retry:retry_cmd",
    "update": "scraper.cli.update:update_cmd",
    "config": "scraper.cli.configuration:config_cmd",
    "status": "scraper.cli.reading:status_cmd",
    "failures": "scraper.cli.reading:failures_cmd",
    "sources": "scraper.cli.reading:sources_cmd",
    "runs": "scraper.cli.reading:runs_cmd",
    "deliver": "scraper.cli.delivery:deliver_cmd",
    "deliveries": "scraper.cli.delivery:deliveries_cmd",
    "redeliver": "scraper.cli.delivery:redeliver_cmd",
    "refresh": "scraper.cli.mirror:refresh_cmd",
    "changes": "scraper.cli.mirror:changes_cmd",
    "history": "scraper.cli.mirror:history_cmd",
    "reextract": "scraper.cli.mirror:reextract_cmd",
    "migrate": "scraper.cli.mirror:migrate_cmd",
    "export": "scraper.cli.products:export_cmd",
    "search": "scraper.cli.products:search_cmd",
    "stats": "scraper.cli.products:stats_cmd",
    "report": "scraper.cli.products:report_cmd",
    "mcp": "scraper.cli.serving:mcp_cmd",
    "serve": "scraper.cli.serving:serve_cmd",
    "discover": "scraper.cli.discover:discover_cmd",
    "tap": "scraper.cli.tap:tap_cmd",
}


@click.group(cls=Group, lazy=COMMANDS,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--config", "config_path", metavar="FILE", envvar=config.ENV_CONFIG,
              help=f"The configuration file: a [scraper] table of settings (and [[source]] tables); without it, "
                   f"./{config.FILE_NAME} when that exists [env {config.ENV_CONFIG}].")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Any setting by its key (`scraper config` lists them), over the file and the environment; "
                   "repeatable.")
@setting_options("db", "sources", "log_level",
                 hidden=("api_url", "site_url", "user_agent", "youtube_url", "browser_path", "browser_timeout"))
@click.version_option(__version__, prog_name="scraper")
@click.pass_context
def main(ctx, config_path, sets, **flags):
    """Collect the n8n.io workflow library into one SQLite file, politely and resumably.

    Every setting has a key (`scraper config` lists them with their values and where each came from),
    set from the [scraper] table of scraper.toml, SCRAPER_<KEY> or --set KEY=VALUE; the later wins.

    \b
    Example:
        scraper seed --from-search
        scraper run --workers 4
        scraper --set rate=1 --set breaker_open=120 update
        scraper status
    """
    ctx.obj = root_options(config_path, sets, flags)
    # from every layer, as the command's settings will (`discover` reads only a few): scraper.toml, the
    # environment, --set log_level=..., --log-level; a mistake in any is the command's own sentence to say
    try:
        level = layered_values(ctx.obj)["log_level"]
    except ConfigError:
        level = "INFO"
    logs.setup(level)
    for name, near in config.unknown_environment(settings.SPECS, os.environ):     # once: the group runs once
        log.warning("the environment variable %s is no setting of scraper, so it is ignored; %s", name,
                    f"the closest is {near}." if near else "`scraper config` lists every setting and its variable.")
