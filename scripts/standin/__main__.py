"""A local stand-in for api.n8n.io and n8n.io, for tests and benchmarks without internet.

    python -m scripts.standin --templates 200 --rate 20 --burst 5 [--faults 503:0.03,...] [--hostile 0.01]
        [--robots rules --robots-disallow-ids 1 --robots-crawl-delay 2 --robots-request-rate 1/5]
        [--latency-ms 20 --slow-phase-factor 10 --slow-phase-s 20 --slow-phase-after-s 5]

It prints ``standin listening on http://127.0.0.1:PORT``, then serves until SIGTERM or SIGINT (exit 0).
The corpus is built from the real data in ``scripts/standin/data``; every counted request passes one
strict token bucket (``/_standin/stats``). Standard library only. Binds 127.0.0.1 only.
"""

import argparse
import signal
import sys
import threading

from . import robots, timeline
from .corpus import DATA_DIR, MAX_TEMPLATES
from .faults import HOSTILE_KINDS, with_hostile
from .server import StandinSite
from .state import ID_PATHS, LOOPBACK
from .validators import MODES


def build_parser():
    """The command line (every option of the site's constructor, plus --hostile)."""
    parser = argparse.ArgumentParser(prog="python -m scripts.standin", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default=LOOPBACK, help="must be 127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    parser.add_argument("--templates", type=int, default=200, help=f"corpus size, 1..{MAX_TEMPLATES}")
    parser.add_argument("--rate", type=float, default=20.0, help="token refill per second; 0 = no limit")
    parser.add_argument("--burst", type=int, default=5, help="token bucket capacity")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay before each admitted answer")
    parser.add_argument("--faults", default="", help="e.g. 503:0.03,500x2:0.02,reset:0.01,404:0.01")
    parser.add_argument("--seed", type=int, default=1, help="decides missing ids and fault ids")
    parser.add_argument("--slow-s", type=float, default=3.0, help="delay of the 'slow' fault")
    parser.add_argument("--trickle-s", type=float, default=1.0, help="pause between bytes of the 'trickle' fault")
    parser.add_argument("--hostile", type=float, default=0.0,
                        help=f"hostile mode: this share of ids for each of {', '.join(HOSTILE_KINDS)}")
    parser.add_argument("--missing-fraction", type=float, default=0.0,
                        help="share of ids listed by search but 404 on detail")
    parser.add_argument("--video-every", type=int, default=0,
                        help="every Nth template links a video of its own, and no other (0 = the data's videos)")
    parser.add_argument("--drift", type=int, default=0,
                        help="1: the default listing order moves on every call, as n8n.io's ranking does "
                             "(sort=createdAt:asc|desc stays stable)")
    parser.add_argument("--paid-every", type=int, default=0,
                        help="every Nth template is paid: price and purchaseUrl listed, detail answer hollow")
    parser.add_argument("--validators", default="none", choices=MODES,
                        help="ETag/Last-Modified and 304s (scripts/standin/validators.py); default none")
    parser.add_argument("--data-dir", default=str(DATA_DIR), help=argparse.SUPPRESS)
    robots.add_arguments(parser, default_mode="none")
    timeline.add_arguments(parser)
    return parser


def main(argv=None):
    """Command-line entry point: serve until SIGTERM/SIGINT, then exit 0."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.host != LOOPBACK:
        parser.error(f"--host must be {LOOPBACK}: the stand-in never listens on other interfaces")
    try:
        site = StandinSite(
            templates=args.templates, rate=args.rate, burst=args.burst, latency_ms=args.latency_ms,
            faults=with_hostile(args.faults, args.hostile), seed=args.seed, slow_s=args.slow_s,
            trickle_s=args.trickle_s,
            missing_fraction=args.missing_fraction, host=args.host, port=args.port, data_dir=args.data_dir,
            robots=robots.from_args(args, id_paths=ID_PATHS),
            video_every=args.video_every, drift=bool(args.drift), paid_every=args.paid_every,
            validators=args.validators,
        )
        if args.slow_phase_s > 0:
            site.timeline.slow(args.slow_phase_factor, args.slow_phase_s, args.slow_phase_after_s)
    except (ValueError, TypeError, OSError) as exc:
        parser.error(str(exc))
    stop = threading.Event()

    def _on_signal(signum, frame):
        stop.set()  # only a flag: the main loop below does the shutdown

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        site.start()
    except OSError as exc:  # e.g. the port is taken
        parser.error(f"cannot listen on {args.host}:{args.port}: {exc}")
    print(f"standin listening on {site.url}", flush=True)
    while not stop.wait(0.5):
        pass
    site.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
