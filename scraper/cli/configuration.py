"""`scraper config`: every setting, its value and where it came from."""

import json
import os

import click

from scraper.base import settings
from scraper.base.errors import ConfigError
from scraper.cli.common import Failure


@click.command("config")
@click.option("--json", "as_json", is_flag=True,
              help='{"file": PATH or null, "settings": {KEY: {"value": V, "origin": ...}}} instead of text.')
@click.pass_context
def config_cmd(ctx, as_json):
    """Every setting with its value and origin: default, file (the [scraper] table of scraper.toml or
    --config), env (SCRAPER_<KEY>) or cli (--set KEY=VALUE or a flag); the later wins. A password in a URL
    is shown as ***. A mistake in any layer is one sentence and exit 2.

    \b
    Example:
        scraper config
        SCRAPER_WORKERS=8 scraper --set rate=1 config --json | jq .settings.rate
    """
    root = ctx.find_root().obj
    try:
        _, resolved = settings.load(root["config"], os.environ, root["cli"])
    except ConfigError as e:
        raise Failure(str(e)) from None
    shown = {key: {"value": spec.show(resolved.values[key]), "origin": resolved.origins[key]}
             for key, spec in settings.SPECS.items()}
    if as_json:
        click.echo(json.dumps({"file": resolved.file, "settings": shown}, indent=2))
        return
    click.echo(f"file: {resolved.file or 'none'}")
    width = max(map(len, shown))
    for key, item in shown.items():
        value = item["value"]
        text = "none" if value in (None, []) else ",".join(map(str, value)) if isinstance(value, list) else str(value)
        click.echo(f"{key:<{width}}  {item['origin']:<7}  {text}")
