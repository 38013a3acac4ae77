"""Local stand-ins of the sites the scraper reads, for tests, benchmarks and the demo without internet.

- ``python -m scripts.standin``: api.n8n.io and n8n.io (``server.StandinSite``), built from ``data/``;
  on 127.0.0.1;
- ``python -m scripts.standin.youtube``: www.youtube.com as youtube-transcript-api sees it; on 127.0.0.1;
- ``python -m scripts.standin.catalogue``: a city events calendar found through a sitemap index with
  gzipped children, JSON-LD event pages and script-rendered ones (``catalogue.CatalogueSite``); on
  127.0.0.2 by default, so it is another domain for the limiter;
- ``python -m scripts.standin.receiver``: a webhook receiver that logs every request and answers 200, 500,
  503, 429 with Retry-After, 410, 302 or hangs, switchable while it runs (``receiver.Receiver``);
- ``python -m scripts.standin.etl``: the ETL API runs are reported to, answering in either field spelling
  (``_id``/``createdAt`` or ``id``/``created_at``; ``etl.EtlApi``); both on 127.0.0.1, both in-process too
  (``Receiver().start()``, ``EtlApi().start()``: ``service``);
- ``client``: start any of them as its own process (``client.start(...)``, ``youtube=True``,
  ``catalogue=True``) and read or steer it through its control routes.

The n8n stand-in and the catalogue share (``control``):

- robots.txt (``robots``): ``--robots none|rules|404|503|unreachable`` plus ``--robots-disallow``,
  ``--robots-disallow-ids``, ``--robots-crawl-delay``, ``--robots-request-rate``, ``--robots-sitemap``,
  ``--robots-body``; at run time ``POST /_standin/robots``; fetches counted as ``stats()["robots"]``.
  The n8n default is ``none`` (404, as before), the catalogue's ``rules`` (allow all, name the sitemap);
- slow phases (``timeline``): ``--slow-phase-factor F --slow-phase-s N --slow-phase-after-s D``, at run time
  ``POST /_standin/slow {"factor": F, "seconds": N}``: answers wait F x ``--latency-ms`` for N seconds;
- the request log (``GET /_standin/requests``): every counted request's arrival time per kind of path, for
  requests per second over time (``client.Standin.rate_series``).

Modules: ``faults`` (the fault kinds and their parser), ``corpus`` (the templates and their answers),
``state`` (the token bucket, counters and library changes), ``hostile`` (the hostile answers),
``server`` (the HTTP handler and the site), ``robots``, ``timeline``, ``control`` (shared by both sites),
``catalogue_data`` (the events and their changes), ``catalogue_pages`` (pages and sitemaps),
``catalogue`` (its server and command line). Standard library only; everything binds 127.0.0.1 (the
catalogue 127.0.0.2 or 127.0.0.1) only.
"""
