"""`scraper discover URL`: a site's address in, a ready `[[source]]` table out (on stdout)."""

import click

from scraper.base import exitcodes
from scraper.cli.common import Failure, log, setting_options, setting_values


@click.command("discover")
@click.argument("url")
@click.option("--name", default=None, help="The source's name (default: from the site's host).")
@click.option("--sample", type=int, default=20, show_default=True,
              help="Pages to read over plain HTTP, spread over the URL shapes of the sitemaps; the visit sends "
                   "at most twice as many requests in all.")
# its own settings, not run's `rate` and `timeout`; spelled --rate and --timeout here too, as they always were
@setting_options("discover_rate", "discover_timeout",
                 aliases={"discover_rate": "--rate", "discover_timeout": "--timeout"})
@click.option("--browser/--no-browser", "use_browser", default=True, show_default=True,
              help="Render pages that carry scripts but no record in a browser (the system's Chromium, "
                   "--browser-path), to tell whether fetcher = \"auto\" is needed.")
@click.pass_context
def discover_cmd(ctx, url, name, sample, use_browser, **flags):
    """Visit a site (robots.txt, its sitemaps, a sample of pages) and print a commented [[source]] table
    for it: include, type, required and fetcher, each with why. Nothing is stored.

    \b
    Example:
        scraper discover https://events.example.org/ --name events >> sources.toml
        scraper --sources sources.toml seed --source events
    """
    from scraper.base.errors import ConfigError, FetchError, ParseError, RobotsUnavailable
    from scraper.mirror import discover
    from scraper.net import chromium
    from scraper.sites.discover import block
    problem = discover.check(url, name, sample)
    if problem:
        raise Failure(problem + ".")
    # the browser, the User-Agent, its rate and timeout from every layer; not the sources file, which may be
    # what stdout makes
    values = setting_values(ctx, flags)
    browser_path, user_agent = values["browser_path"], values["user_agent"]
    rate_per_s, timeout_s = values["discover_rate"], values["discover_timeout"]
    render, close = None, None
    if use_browser:
        if chromium.problem(browser_path) is None:
            render, close = discover.open_browser(chromium.find_browser(browser_path), user_agent, timeout_s)
        else:
            log.info("discover: no browser (%s); pages that build their record in a script are not rendered",
                     chromium.problem(browser_path))
    options = discover.Options(url=url, name=name, sample=sample, rate_per_s=rate_per_s,
                               user_agent=user_agent, timeout_s=timeout_s)
    try:
        proposal = discover.discover(options, render=render)
    except ConfigError as e:
        raise Failure(str(e), exitcodes.FAILED) from None
    except RobotsUnavailable as e:
        raise Failure(f"{e}: discover obeys robots.txt, try again later.", exitcodes.FAILED) from None
    except (FetchError, ParseError) as e:
        raise Failure(f"{url} could not be read ({e}); nothing to propose.", exitcodes.FAILED) from None
    finally:
        if close is not None:
            close()
    log.info("discover: %d request(s) sent; the proposed source follows on stdout", proposal.requests)
    click.echo(block(proposal), nl=False)

