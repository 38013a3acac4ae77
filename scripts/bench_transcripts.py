"""Does fetching transcripts slow the n8n part of a run? The same run with --no-transcripts and with
--transcripts, against the two local stand-ins at the default rates; prints the n8n efficiency of each.

    .venv/bin/python -m scripts.bench_transcripts [--templates 150] [--video-every 7] [--workers 4] [--runs 1]

The n8n efficiency is (requests - burst) / rate over the span from the first n8n request to the last
(issue 21's measure; the times are the run's request log). Requests, 429s and the busiest second are
counted by the stand-ins themselves. Every `--video-every`th template links a video of its own (three
YouTube requests a transcript, fewer for a video without one). Everything stays on 127.0.0.1.
Exit code 1 when the figures miss issue 21's targets (on >= 0.97, within 0.01 of off, no 429).
"""

import argparse
import sys
import tempfile
from pathlib import Path

from scripts.benchkit import default_domains, domains_run, efficiency


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--templates", type=int, default=150)
    parser.add_argument("--video-every", type=int, default=7)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rate", type=float, default=2.0, help="n8n stand-in limit and scraper rate")
    parser.add_argument("--youtube-rate", type=float, default=0.2, help="YouTube stand-in limit and scraper rate")
    parser.add_argument("--latency-ms", type=float, default=40.0)
    parser.add_argument("--runs", type=int, default=1, help="pairs of runs (off, on)")
    parser.add_argument("--on-only", action="store_true", help="only the runs with transcripts (no comparison)")
    args = parser.parse_args()
    print(f"{args.templates} templates (one in {args.video_every} with its own video), {args.workers} workers, "
          f"n8n {args.rate:g}/s burst 5, youtube {args.youtube_rate:g}/s burst 2, latency {args.latency_ms:g} ms")
    print(f"{'transcripts':<12}{'n8n eff':>9}{'n8n s':>8}{'n8n req':>9}{'429':>5}{'max/1s':>8}"
          f"{'yt eff':>8}{'yt req':>8}{'429':>5}{'yt most in flight':>19}")
    ok = True
    with tempfile.TemporaryDirectory() as workdir:
        for i in range(args.runs):
            effs = {}
            for mode in ("on",) if args.on_only else ("off", "on"):
                domains = default_domains(args.templates, args.video_every, args.rate, args.youtube_rate)
                f = domains_run(Path(workdir) / f"bench-{mode}-{i}.db", domains, args.workers, args.latency_ms,
                                transcripts=mode == "on")
                n, y = f["n8n"], f["youtube"]
                effs[mode] = efficiency(n["times"], n["rate"], n["burst"])
                y_eff = efficiency(y["times"], y["rate"], y["burst"]) if mode == "on" else None
                print(f"{mode:<12}{effs[mode]:>9.3f}{n['times'][-1] - n['times'][0]:>8.1f}{n['requests']:>9}"
                      f"{n['http_429']:>5}{n['max_in_1s']:>8}{y_eff or 0:>8.3f}{y['requests']:>8}{y['http_429']:>5}"
                      f"{y['max_in_flight']:>19}",
                      flush=True)
                ok = ok and n["http_429"] == 0 and y["http_429"] == 0
            ok = ok and effs["on"] >= 0.975 and effs["on"] >= effs.get("off", 0) - 0.01   # issue 31: 0.975
            if "off" in effs:
                print(f"n8n efficiency on - off: {effs['on'] - effs['off']:+.3f}")
    print("targets (on >= 0.975, within 0.01 of off, no 429):", "met" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
