"""What the last line of a run tells the operator to do next, for each way a run can end."""

from scraper.base.exitcodes import CRASHING, DB_DOWN, DISK_FULL, FAILED, GAVE_UP, LOCKED, OK, SIGINT, SIGTERM, USAGE
from scraper.policy.progress import format_duration

KEY_SETTING = "SCRAPER_BROWSERBASE_KEY"     # a reason naming it: the provider refused the key, no wait cures it


def next_step(code, failed=0, domains=(), retry_in_s=None, kinds=("n8n",), browserless=(), incomplete=0,
              scripted=0, unrendered=0, refused=None):
    """One sentence: what to do after a run that exited `code`.

    `failed` is the database's count of failed rows, `domains` the domains whose breaker gave up,
    `retry_in_s` how long until such a domain may be tried again (when known), `kinds` those of the
    sources the run worked (n8n alone: the n8n walk is the way to what is new), `browserless` the sources
    left pending because they need a browser and none could be started, `incomplete` the failed rows whose
    page lacked required fields (a retry fetches the same page), `scripted` those of them whose page carries
    scripts (fetcher = "auto" is the likely cure), `unrendered` the failed rows whose remote browser endpoint
    refused every session for browser_wait (or whose provider refused the key), `refused` the reason one of them
    stored (it names the endpoint, or the key's setting: then the cure is the key)."""
    if code == GAVE_UP and browserless:
        also = f"; {', '.join(domains)} also kept failing" if domains else ""
        return (f"next: source(s) {', '.join(browserless)} need a browser and none could be started, so their "
                f"jobs were left pending{also}; install Debian's chromium or set --browser-path, then run again.")
    if code == OK:
        if set(kinds) - {"n8n"}:
            return ("next: nothing to do; `scraper seed` walks each source when it is due (`--source NAME` at "
                    "once) for what was published since.")
        # the README's (and the crontab's) command: the walk when it is due, old failures, then the run
        return ("next: nothing to do; `scraper update` walks the n8n listing when it is due and fetches the "
                "templates published since.")
    if code == FAILED and unrendered:
        rest = failed - unrendered
        other = f"; the other {rest}: see `scraper failures`" if rest > 0 else ""
        cure = (f"set {KEY_SETTING} to a key Browserbase accepts" if refused and KEY_SETTING in refused
                else "bring the endpoint back (or raise browser_wait)")
        return (f"next: {refused or 'a browser endpoint refused every session'}, so {unrendered} job(s) failed "
                f"browser_unavailable{other}; {cure}, then `scraper retry --failed` and run again (cron's "
                f"`scraper update` does both).")
    if code == FAILED and incomplete:
        cure = (f'; {scripted} of them carry scripts: set fetcher = "auto" for their source, then '
                f"`scraper retry --failed`" if scripted else
                "; fix the source's `required` or `fields`, or the page, before any retry")
        rest = failed - incomplete
        other = (f"; the other {rest}: `scraper retry --failed` and run again" if rest > 0 else "")
        return (f"next: {failed} job(s) are failed, {incomplete} of them `incomplete` (their page lacks required "
                f"fields; a retry fetches the same page, see `scraper failures`){cure}{other}.")
    if code == FAILED:
        return (f"next: {failed} job(s) are failed; see why with `scraper failures`, then "
                f"`scraper retry --failed` and run again.")
    if code == GAVE_UP:
        which = ", ".join(domains) or "a domain"
        when = f" in {format_duration(retry_in_s)} or later" if retry_in_s else " later"
        return (f"next: {which} kept failing, so its jobs were left pending; run again{when} "
                f"(cron's next run will), and check `scraper status` for its breaker.")
    if code == CRASHING:
        return "next: workers died right after they started; fix the cause in the errors above, then run again."
    if code == DB_DOWN:
        return ("next: bring the database back (or raise db_down_after for a longer failover), then run again; "
                "nothing was lost and the unfinished jobs come back as their leases expire.")
    if code == DISK_FULL:
        return ("next: free space on the disk the error above names (or lower min_free_mb), then run again; "
                "every unfinished job went back to pending.")
    if code == LOCKED:
        return ("next: let the run that holds it finish (`scraper status` shows its pid); "
                "cron's next run tries again.")
    if code in (SIGINT, SIGTERM):
        return "next: run again to resume; every unfinished job was handed back."
    if code == USAGE:
        return "next: fix the command line or configuration named above, then run again."
    return f"next: the run ended with the unexpected exit code {code}; read the errors above, then run again."
