"""The run's pacing, kept by the supervisor: each domain's effective rate written at the start (and the
robots.txt rules ignored on purpose said once), the adaptive slow-down once a sample, and at the end how
many jobs robots.txt disallowed. The figures live in each domain's row, which every worker obeys."""

import logging

from scraper import sites
from scraper.base.settings import YOUTUBE_DOMAIN
from scraper.db import domains
from scraper.db import politeness as politeness_rows
from scraper.politeness import rates, robots

log = logging.getLogger(__name__)


class Pacing:
    def __init__(self, settings, conn, clock, started_at):
        self.s = settings
        self.conn = conn
        self.clock = clock
        self.started_at = started_at
        self._adapted_at = self.clock.monotonic()

    def start(self):
        """Each domain's configured rate in its row (status shows it); say which rules are ignored."""
        domains.new_run(self.conn)
        for domain in sites.domains(self.s):
            rates.store_effective(self.conn, self.s, domain, self.clock())
        ignored = [d for d in sites.domains(self.s) if robots.ignored(self.s, d)]
        if ignored:
            log.warning("ignoring the robots.txt rules of %s, as asked (--robots%s)", ", ".join(ignored),
                        " ignore" if self.s.robots == robots.IGNORE else "-ignore")
        if self.s.transcripts and not robots.ignored(self.s, YOUTUBE_DOMAIN):
            log.warning("transcripts are on but YouTube's robots.txt disallows the transcript endpoints, so their "
                        "jobs will end invalid (kind robots); --robots-ignore %s is the knowing choice",
                        YOUTUBE_DOMAIN)
        self._adapted_at = self.clock.monotonic()

    def adapt(self, mono):
        """The adaptive slow-down, once a sample: its rate goes in each domain's row."""
        if not self.s.adaptive:
            return
        dt, self._adapted_at = mono - self._adapted_at, mono
        for domain in sites.domains(self.s):
            rates.adapt(self.conn, self.s, domain, self.started_at, self.clock(), dt)

    def robots_summary(self):
        """Once per run: how many jobs robots.txt disallowed, and the opt-in that would allow them."""
        for domain, n in politeness_rows.disallowed_since(self.conn, self.started_at).items():
            log.warning("robots.txt disallowed %d job(s) of %s; they end invalid (kind robots). To ignore its "
                        "rules knowingly: --robots-ignore %s", n, domain, domain)

    def gave_up_reasons(self):
        """{domain: sentence} of the domains given up for a reason of their own (robots.txt)."""
        return domains.gave_up_reasons(self.conn)
