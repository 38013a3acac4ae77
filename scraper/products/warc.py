"""`export --format warc`: the stored raw answers as a WARC 1.1 file (ISO 28500), the format Heritrix,
brozzler, browsertrix and pywb keep what a crawler received in.

A `warcinfo` record first (the tool and its version), then one `response` record per stored answer
version: its URL as WARC-Target-URI, the time its body was fetched as WARC-Date, the HTTP status and
Content-Type as recorded, and the payload byte for byte as served (decoded: the mirror keeps no
Content-Encoding, so none is claimed). After it, a `revisit` record for each time that content was asked
for again and came back the same (issue 43): profile server-not-modified for a 304, identical-payload-digest
for a 200 whose body had not changed, each pointing at the response (WARC-Refers-To, -Target-URI, -Date),
with an empty block. One gzip member per record, so any record can be read alone.
The file is written through a temporary file beside it and streamed: one answer in memory at a time.

warcio is an optional extra (`pip install 'scraper[warc]'`): only this format needs it.
"""

import datetime
import io
import os
from dataclasses import dataclass
from http import HTTPStatus

from scraper import __version__
from scraper.base.errors import ConfigError
from scraper.mirror import versions
from scraper.policy import revalidate
from scraper.products import output

RECONSTRUCTED_HEADER = "WARC-Scraper-Reconstructed"   # which fields an answer stored before schema 7 lacked


NOT_MODIFIED = "server-not-modified"
PROFILES = {NOT_MODIFIED: "http://netpreserve.org/warc/1.1/revisit/server-not-modified",
            "identical-payload-digest": "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"}


@dataclass
class Summary:
    records: int = 0
    reconstructed: int = 0
    bytes: int = 0
    revisits: int = 0

    def describe(self):
        line = (f"{self.records} response record(s), {self.bytes / 2**20:.1f} MB; the answers are as served, "
                f"not redacted (an archive keeps what was received)")
        if self.revisits:
            line += f"; {self.revisits} revisit record(s) (a 304, or a 200 whose content had not changed)"
        if self.reconstructed:
            line += (f"; {self.reconstructed} answer(s) stored before URLs were kept have their URL rebuilt "
                     f"(marked {RECONSTRUCTED_HEADER})")
        return line + "."


def require():
    try:
        import warcio  # noqa: F401 - only checking that it is there
    except ImportError:
        raise ConfigError("--format warc needs warcio: pip install 'scraper[warc]'.") from None


def warc_date(iso_text):
    """WARC-Date (W3C-DTF, UTC, `Z`) of a stored ISO 8601 time (or Unix seconds); fractions of a second kept
    (WARC 1.1)."""
    if isinstance(iso_text, (int, float)):
        iso_text = datetime.datetime.fromtimestamp(iso_text, datetime.timezone.utc).isoformat()
    t = datetime.datetime.fromisoformat(iso_text.replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.timezone.utc)
    t = t.astimezone(datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{t.microsecond:06d}" if t.microsecond else "") + "Z"


def write_file(conn, path, urls, source=None, since=None, live_only=False, now=None):
    """Write the WARC to `path` (through a temporary file beside it); returns a Summary.
    `urls`: (api_url, site_url) for rebuilding the URLs of answers stored before they were kept."""
    require()
    output.check_folder(path, "WARC export")
    versions.check_source(conn, source)         # before a file exists
    answers = versions.stored(conn, urls, source, since, live_only)
    with output.atomic(path, binary=True, what="WARC export") as out:
        return write(out, answers, os.path.basename(path), lambda url: versions.revisits(conn, url))


def write(out, answers, filename, revisits=lambda url: ()):
    """Write the warcinfo record and one response record per `versions.Stored` to the binary stream `out`,
    each followed by the revisits of its content (`revisits(url)`: `versions.Revisit`s)."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    writer = WARCWriter(out, gzip=True, warc_version="1.1")     # gzip: one member per record
    writer.write_record(writer.create_warcinfo_record(filename, {
        "software": f"scraper/{__version__}",
        "format": "WARC File Format 1.1",
        "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
        "description": "raw answers of the n8n.io template library, one response record per stored version",
    }))
    summary = Summary()
    for a in answers:
        reason = HTTPStatus(a.status).phrase if a.status in HTTPStatus._value2member_map_ else ""
        http = StatusAndHeaders(f"{a.status} {reason}".strip(),
                                [("Content-Type", a.content_type), ("Content-Length", str(len(a.body)))],
                                protocol="HTTP/1.1")
        headers = {"WARC-Date": warc_date(a.fetched_at)}
        if a.reconstructed:
            headers[RECONSTRUCTED_HEADER] = " ".join(a.reconstructed)
            summary.reconstructed += 1
        record = writer.create_warc_record(a.url, "response", payload=io.BytesIO(a.body), length=len(a.body),
                                           http_headers=http, warc_headers_dict=headers)
        writer.write_record(record)
        summary.records += 1
        summary.bytes += len(a.body)
        summary.revisits += _revisits(writer, a, record, headers["WARC-Date"], revisits(a.url))
    return summary


def _revisits(writer, a, response, refers_date, found):
    """The revisit records of the stored answer `a` (written as `response`): those of its content only."""
    digest, written = revalidate.digest(a.body), 0
    for r in found:
        if r.digest != digest:
            continue        # another version's content
        headers = {"WARC-Date": warc_date(r.at), "WARC-Profile": PROFILES[r.profile],
                   "WARC-Refers-To": response.rec_headers.get_header("WARC-Record-ID"),
                   "WARC-Refers-To-Target-URI": a.url, "WARC-Refers-To-Date": refers_date,
                   "WARC-Truncated": "length"}
        if r.profile != NOT_MODIFIED:   # identical-payload-digest requires it; server-not-modified prohibits it
            headers["WARC-Payload-Digest"] = response.rec_headers.get_header("WARC-Payload-Digest")
        writer.write_record(writer.create_warc_record(a.url, "revisit", payload=io.BytesIO(b""), length=0,
                                                      warc_headers_dict=headers))
        written += 1
    return written
