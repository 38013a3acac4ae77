"""Local stand-ins of the sites the scraper reads, for tests, benchmarks and the demo without internet.

- ``python -m scripts.standin``: api.n8n.io and n8n.io (``server.StandinSite``), built from ``data/``;
- ``python -m scripts.standin.youtube``: www.youtube.com as youtube-transcript-api sees it;
- ``client``: start either one as its own process and read or steer it through its control routes.

Modules: ``faults`` (the fault kinds and their parser), ``corpus`` (the templates and their answers),
``state`` (the token bucket, counters and library changes), ``hostile`` (the hostile answers),
``server`` (the HTTP handler and the site). Standard library only; everything binds 127.0.0.1 only.
"""
