"""YouTube transcripts: one job per video, fetched with youtube-transcript-api 1.2.

The library sends its own requests (watch page, player API, caption track) through the requests Session
we give it. An adapter on that Session takes the domain's rate slot before each of them, bounds it in
time, and sends every request meant for https://www.youtube.com to `settings.youtube_url` instead (same
path and query), so tests and demos reach a local stand-in. Anything else the library might ask for is
refused.
"""

import json
import re
import time

import requests
from requests.adapters import HTTPAdapter
from youtube_transcript_api import YouTubeTranscriptApi
from youtube_transcript_api import _errors as yt

from scraper.base.errors import FetchError, JobInvalid, ParseError
from scraper.base.settings import MAX_ANSWER_MB, YOUTUBE_DOMAIN, YOUTUBE_URL
from scraper.net import http
from scraper.policy import retry
from scraper.sites import Result, Site

SITE = "youtube"
_VIDEO_ID_RE = re.compile(r"[A-Za-z0-9_-]{11}")

# failure kinds of a video that has nothing to fetch (final: `invalid`, the reason kept)
NO_TRANSCRIPT = "no_transcript"
TRANSCRIPTS_DISABLED = "transcripts_disabled"
VIDEO_UNAVAILABLE = "video_unavailable"
AGE_RESTRICTED = "age_restricted"
VIDEO_UNPLAYABLE = "video_unplayable"


def watch_url(video_id: str) -> str:
    return f"{YOUTUBE_URL}/watch?v={video_id}"


def job_key(video_id: str) -> str:
    return f"{SITE}:{video_id}"


def parse_key(key: str) -> str:
    """Video id of a job key 'youtube:<id>'; ParseError for another key."""
    site, _, video_id = key.partition(":")
    if site != SITE or not _VIDEO_ID_RE.fullmatch(video_id):
        raise ParseError(f"{key!r} is not a YouTube job key")
    return video_id


def pick(transcripts, languages):
    """The transcript to fetch from a TranscriptList: the first of `languages` (manual before generated),
    else any manual one, else any generated one; JobInvalid when the video has none."""
    try:
        return transcripts.find_transcript(languages)
    except yt.NoTranscriptFound:
        pass
    listed = list(transcripts)      # manual ones first, as the library lists them
    if not listed:
        raise JobInvalid(NO_TRANSCRIPT, "the video has no transcript in any language")
    return listed[0]


def transcript_row(video_id, fetched, fetched_at):
    """One `transcripts` row from a FetchedTranscript."""
    segments = [{"text": s.text, "start": s.start, "duration": s.duration} for s in fetched.snippets]
    return {
        "video_id": video_id,
        "language_code": fetched.language_code,
        "is_generated": int(bool(fetched.is_generated)),
        "text": " ".join(t for t in (s.text.strip() for s in fetched.snippets) if t),
        "segments": json.dumps(segments, ensure_ascii=False, separators=(",", ":")),
        "fetched_at": fetched_at,
    }


def classify(exc, status=None):
    """The error a library exception stands for: JobInvalid (final), or FetchError with its kind."""
    if isinstance(exc, yt.RequestBlocked):          # IpBlocked (429, recaptcha page) is a RequestBlocked
        return FetchError(retry.BLOCKED, f"YouTube blocks this address ({type(exc).__name__})", status=status)
    if isinstance(exc, yt.TranscriptsDisabled):
        return JobInvalid(TRANSCRIPTS_DISABLED, "transcripts are disabled for this video")
    if isinstance(exc, yt.NoTranscriptFound):
        return JobInvalid(NO_TRANSCRIPT, "the video has no transcript in any language")
    if isinstance(exc, (yt.VideoUnavailable, yt.InvalidVideoId)):
        return JobInvalid(VIDEO_UNAVAILABLE, "the video is unavailable")
    if isinstance(exc, yt.AgeRestricted):
        return JobInvalid(AGE_RESTRICTED, "the video is age restricted (transcripts need a signed-in account)")
    if isinstance(exc, yt.VideoUnplayable):
        return JobInvalid(VIDEO_UNPLAYABLE, f"the video cannot be played: {exc.reason or 'no reason given'}")
    if isinstance(exc, yt.YouTubeRequestFailed):
        kind = http.kind_of_status(status) if status else retry.HTTP_4XX
        return FetchError(kind or retry.HTTP_4XX, f"YouTube answered HTTP {status}", status=status)
    if isinstance(exc, requests.RequestException):
        return FetchError(http.kind_of_exception(exc), f"{type(exc).__name__}: {exc}")
    # YouTubeDataUnparsable, PoTokenRequired, a consent page we could not pass, bad JSON or XML
    return FetchError(retry.PARSE, f"YouTube's answer could not be read ({type(exc).__name__})", status=status)


class RedirectAdapter(HTTPAdapter):
    """Mounted on every scheme of the library's Session: each request waits for the job's rate slot
    (`ctx.gate()`), goes to `base_url` instead of www.youtube.com, and is bounded as `http.fetch` bounds
    ours: `timeout_s` over the whole answer, `max_bytes` of decoded body (FetchError otherwise)."""

    def __init__(self, base_url, timeout_s, max_bytes=MAX_ANSWER_MB * 2**20):
        super().__init__()
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self.ctx = None             # the current job's Context, set by the fetcher
        self.last_status = None

    def send(self, request, **kwargs):
        if request.url.startswith(YOUTUBE_URL + "/"):
            request.url = self.base_url + request.url[len(YOUTUBE_URL):]
        elif not request.url.startswith(self.base_url + "/"):
            raise requests.exceptions.InvalidURL(f"refused: {request.url} is not a YouTube address")
        self.ctx.gate(request.url)      # robots.txt of where the request really goes, then the rate slot
        started = time.monotonic()
        deadline = started + self.timeout_s
        kwargs["timeout"] = kwargs.get("timeout") or self.timeout_s   # the library sets none
        kwargs["stream"] = True     # read below, under the deadline and the size cap
        try:
            resp = super().send(request, **kwargs)
        except requests.RequestException as e:
            error = FetchError(http.kind_of_exception(e), f"{type(e).__name__}: {e}", request.url)
            self._log(error.kind, None, started)
            self.ctx.failed(error)
            raise
        try:
            body = http.read_body(resp, request.url, deadline, self.timeout_s, self.max_bytes)
        except FetchError as e:
            self._log(e.kind, resp.status_code, started)
            if e.kind in retry.BREAKER_KINDS:
                self.ctx.failed(e)
            raise                   # not a RequestException: the library lets it through to the worker
        resp._content, resp._content_consumed = body, True     # what requests keeps after a full read
        kind = http.kind_of_status(resp.status_code)
        self._log(kind or "ok", resp.status_code if kind else None, started)
        self.last_status = resp.status_code
        if resp.status_code >= 500:
            self.ctx.failed(FetchError(retry.HTTP_5XX, f"HTTP {resp.status_code}", request.url, resp.status_code))
        return resp


    def _log(self, kind, status, started):
        self.ctx.logged(kind, status, int((time.monotonic() - started) * 1000))


class _Fetcher:
    def __init__(self, settings):
        self.s = settings
        self.session = requests.Session()
        self.session.headers["User-Agent"] = settings.user_agent
        self.adapter = RedirectAdapter(settings.youtube_url, settings.timeout_s, settings.max_answer_bytes)
        for prefix in ("http://", "https://"):
            self.session.mount(prefix, self.adapter)
        self.api = YouTubeTranscriptApi(http_client=self.session)   # one per process: it is not thread-safe

    def fetch(self, job, ctx):
        video_id = parse_key(job.key)
        self.adapter.ctx, self.adapter.last_status = ctx, None
        try:
            transcript = pick(self.api.list(video_id), self.s.transcript_languages)
            fetched = transcript.fetch()
        except JobInvalid:
            ctx.answered()
            raise
        except (yt.CouldNotRetrieveTranscript, requests.RequestException, ValueError, SyntaxError) as e:
            # defusedxml's ParseError is a SyntaxError; a bad player answer is a ValueError
            error = classify(e, self.adapter.last_status)
            if isinstance(error, JobInvalid):
                ctx.answered()
            elif error.kind == retry.BLOCKED:
                ctx.failed(error)
            raise error from e
        finally:
            self.adapter.ctx = None
        ctx.answered()
        return Result(rows=(("transcripts", transcript_row(video_id, fetched, ctx.fetched_at()), "video_id"),))

    def close(self):
        self.session.close()


class _Site:
    name = SITE

    def domain(self, settings):
        # the real host's domain, even when the requests go to a stand-in: youtube.com's budget applies
        return YOUTUBE_DOMAIN

    def domains(self, settings):
        return [self.domain(settings)]

    def job_row(self, settings, video_id):
        return job_key(video_id), SITE, watch_url(video_id), YOUTUBE_DOMAIN

    def requests_per_job(self, settings):
        return 3    # the watch page, the player API, the timed text (fewer when there is no transcript)

    def open(self, settings):
        return _Fetcher(settings)

    def gone(self, job):
        return Result()     # a video that is gone is simply `invalid`; nothing else records it


site: Site = _Site()       # mypy checks that it follows the seam
