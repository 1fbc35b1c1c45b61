"""A local fake of the OpenReview API (v1 or v2) that the real openreview-py client talks to.

It serves what openreview-py 2.9.1 requests when listing a venue and downloading PDFs:
``GET /notes`` (``invitation``, ``details``, ``sort=id``, ``after``, ``offset``, ``limit``; every
answer carries ``count``), ``GET /groups?id=``, ``GET /pdf?id=`` (v1 ``get_pdf``) and
``GET /attachment?id=&name=pdf`` (v2 ``get_attachment``).  Anything else answers 404 in
OpenReview's JSON error shape.

Notes are kept as raw API JSON: real API v1 notes from ``tests/data/openreview/``
(:meth:`FakeOpenReview.load_real_v1`) and generated ones shaped like the API's
(v1: ``invitation`` string and plain content values; v2: ``invitations`` list and
``{"value": ...}`` content).  The state can be changed while the server runs (add papers
and reviews, edit a review, inject faults), and every request is recorded, so tests can
assert paging and that nothing hammers the server.

Usage::

    with FakeOpenReview(api="v1") as fake:
        pid = fake.add_paper("Fake.cc/2020/Conference", decision="Accept (Poster)")
        fake.add_review(pid)
        fake.fail_next(1, status=429, retry_after=1)
        ...  # point settings.ingest.openreview_baseurl_v1 at fake.url
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.fakes._loopback import LoopbackServer

DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "openreview"
REAL_V1_VENUE = "NIPS.cc/2018/Workshop/CDNNRIA"
REAL_V1_PAPER = "r1eLk2mKiX"


def ms(when: datetime) -> int:
    """A naive-UTC datetime as OpenReview's epoch milliseconds."""
    return int(when.replace(tzinfo=UTC).timestamp() * 1000)


class FakeOpenReview:
    """The fake server's state and controls; :meth:`start` serves it on 127.0.0.1 (ephemeral port)."""

    def __init__(self, api: str = "v1") -> None:
        if api not in ("v1", "v2"):
            raise ValueError("api must be v1 or v2")
        self.api = api
        self.venues: set[str] = set()
        self.submissions: dict[str, dict[str, Any]] = {}
        self.replies: dict[str, list[dict[str, Any]]] = {}
        self.pdfs: dict[str, bytes] = {}
        self.requests: list[dict[str, Any]] = []
        self._faults: list[dict[str, Any]] = []
        self._holds: list[Hold] = []
        self._venue_of: dict[str, str] = {}
        self._number: dict[str, int] = {}
        self._counter = 0
        self._lock = threading.Lock()
        self._server: LoopbackServer | None = None

    # -- lifecycle ---------------------------------------------------------
    def start(self) -> FakeOpenReview:
        """Serve in a daemon thread."""
        fake = self

        class Handler(_Handler):
            state = fake

        self._server = LoopbackServer(Handler)
        return self

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.close()
            self._server = None

    def __enter__(self) -> FakeOpenReview:
        return self.start()

    def __exit__(self, *_exc: Any) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL to give openreview-py."""
        assert self._server is not None, "call start() first"
        return self._server.base_url

    # -- content -------------------------------------------------------------
    def _new_id(self) -> str:
        self._counter += 1
        # Hash-like ids, so that sort=id order differs from insertion order (as on OpenReview).
        return "F" + hashlib.sha1(f"fake-{self.api}-{self._counter}".encode()).hexdigest()[:9]

    def add_venue(self, venue_id: str) -> None:
        """A venue group (exists even without submissions)."""
        with self._lock:
            self.venues.add(venue_id)

    def add_raw(self, venue_id: str, submission: dict[str, Any], replies: list[dict[str, Any]] = ()) -> str:
        """A submission note and its replies as raw API JSON (used for the real v1 notes)."""
        with self._lock:
            self.venues.add(venue_id)
            note = copy.deepcopy(submission)
            note.pop("details", None)
            self.submissions[note["id"]] = note
            self._venue_of[note["id"]] = venue_id
            self._number[note["id"]] = note.get("number") or len(self.submissions)
            self.replies.setdefault(note["id"], []).extend(copy.deepcopy(r) for r in replies)
            for reply in self.replies[note["id"]]:
                reply.pop("details", None)
            return note["id"]

    def load_real_v1(self) -> str:
        """The real submission r1eLk2mKiX with its 3 reviews, decision and an author comment."""
        def read(name: str) -> Any:
            return json.loads((DATA_DIR / name).read_text(encoding="utf-8"))

        replies = [*read("v1_notes_official_reviews_r1eLk2mKiX.json"), read("v1_note_decision_r1eLk2mKiX.json"),
                   read("v1_note_official_comment_r1eLk2mKiX.json")]
        return self.add_raw(REAL_V1_VENUE, read("v1_note_submission_r1eLk2mKiX.json"), replies)

    def _wrap(self, content: dict[str, Any]) -> dict[str, Any]:
        if self.api == "v1":
            return content
        return {k: {"value": v} for k, v in content.items()}

    def add_paper(self, venue_id: str, *, title: str | None = None, abstract: str | None = "An abstract.",
                  withdrawn: bool = False, decision: str | None = None, pdf: bytes | None = None,
                  submitted: datetime = datetime(2020, 9, 25, 12, 0)) -> str:
        """A generated submission (optionally withdrawn, with a decision and a PDF); returns its id."""
        with self._lock:
            self.venues.add(venue_id)
            paper_id = self._new_id()
            number = len(self.submissions) + 1
            stamp = ms(submitted + timedelta(minutes=number))
            content: dict[str, Any] = {
                "title": title or f"Fake paper {number}",
                "authors": [f"Author {number}a", f"Author {number}b"],
                "keywords": ["fakes", "testing"],
                "pdf": f"/pdf/{hashlib.sha1(pdf or paper_id.encode()).hexdigest()}.pdf",
            }
            if abstract is not None:
                content["abstract"] = abstract
            note: dict[str, Any] = {
                "id": paper_id, "forum": paper_id, "number": number, "cdate": stamp, "tcdate": stamp,
                "tmdate": stamp, "ddate": None, "replyto": None, "readers": ["everyone"],
                "signatures": [f"{venue_id}/Paper{number}/Authors"], "writers": [venue_id],
            }
            if self.api == "v1":
                kind = "Withdrawn_Submission" if withdrawn else "Blind_Submission"
                note.update(invitation=f"{venue_id}/-/{kind}", original=None, referent=None, nonreaders=[])
            else:
                content["venueid"] = f"{venue_id}/Withdrawn_Submission" if withdrawn else f"{venue_id}/Submission"
                content["venue"] = "Withdrawn Submission" if withdrawn else "Fake Conference Submission"
                note.update(invitations=[f"{venue_id}/-/Submission", f"{venue_id}/-/Post_Submission"],
                            domain=venue_id, mdate=stamp, pdate=None, odate=stamp)
            note["content"] = self._wrap(content)
            self.submissions[paper_id] = note
            self._venue_of[paper_id] = venue_id
            self._number[paper_id] = number
            self.replies[paper_id] = []
            if pdf is not None:
                self.pdfs[paper_id] = pdf
        if decision is not None:
            self._add_reply(paper_id, "Decision", {"title": "Paper Decision", "decision": decision},
                            submitted + timedelta(days=100), signature="Program_Chairs")
        if withdrawn and self.api == "v2":
            self._add_reply(paper_id, "Withdrawal", {"withdrawal_confirmation": "I have read and agree."},
                            submitted + timedelta(days=50), signature="Authors")
        return paper_id

    def add_malformed_paper(self, venue_id: str) -> str:
        """A submission note without ``content`` (the source must report it and go on)."""
        paper_id = self.add_paper(venue_id)
        with self._lock:
            del self.submissions[paper_id]["content"]
        return paper_id

    def _add_reply(self, paper_id: str, suffix: str, content: dict[str, Any], created: datetime,
                   signature: str, reply_id: str | None = None, visible: datetime | None = None) -> str:
        with self._lock:
            venue_id = self._venue_of[paper_id]
            number = self._number[paper_id]
            reply_id = reply_id or self._new_id()
            stamp = ms(created)
            group = "Paper" if self.api == "v1" else "Submission"
            invitation = f"{venue_id}/{group}{number}/-/{suffix}"
            note: dict[str, Any] = {
                "id": reply_id, "forum": paper_id, "replyto": paper_id, "number": len(self.replies[paper_id]) + 1,
                "cdate": stamp, "tcdate": stamp, "tmdate": stamp, "ddate": None, "readers": ["everyone"],
                "signatures": [f"{venue_id}/{group}{number}/{signature}"], "writers": [venue_id],
                "content": self._wrap(content),
            }
            if self.api == "v1":
                note.update(invitation=invitation, original=None, referent=None, nonreaders=[])
            else:
                note.update(invitations=[invitation, f"{venue_id}/-/Edit"], domain=venue_id, mdate=stamp,
                            pdate=ms(visible) if visible else None)
            self.replies[paper_id].append(note)
            return reply_id

    def add_review(self, paper_id: str, text: str | None = None, *, kind: str = "official_review",
                   rating: str | int = "6: Weak Accept", created: datetime = datetime(2020, 11, 1, 9, 0),
                   visible: datetime | None = None, reply_id: str | None = None) -> str:
        """An official review or meta-review (``kind="meta_review"``); returns its id."""
        text = text or f"This paper studies a question. Review {self._counter + 1} of {paper_id}."
        signer = "AnonReviewer1" if self.api == "v1" else "Reviewer_x1Y2"
        if kind == "meta_review":
            content = {"title": "Meta review", "metareview": text, "recommendation": "Accept"}
            return self._add_reply(paper_id, "Meta_Review", content, created, "Area_Chair1", reply_id, visible)
        if self.api == "v1":
            content = {"title": "A review", "review": text, "rating": rating, "confidence": "4: confident"}
        else:
            content = {"summary": text, "strengths": "Clear writing.", "weaknesses": "Small experiments.",
                       "rating": rating, "confidence": 4}
        return self._add_reply(paper_id, "Official_Review", content, created, signer, reply_id, visible)

    def add_comment(self, paper_id: str, text: str = "Thanks for the reviews.") -> str:
        """An author comment (not a review)."""
        return self._add_reply(paper_id, "Official_Comment", {"comment": text}, datetime(2020, 11, 15), "Authors")

    def edit_review(self, review_id: str, new_text: str) -> None:
        """Change a review's main text and bump its modification dates by one day."""
        with self._lock:
            for replies in self.replies.values():
                for note in replies:
                    if note["id"] == review_id:
                        field = "review" if self.api == "v1" else "summary"
                        note["content"][field] = new_text if self.api == "v1" else {"value": new_text}
                        note["tmdate"] = note["tmdate"] + 86_400_000
                        if "mdate" in note:
                            note["mdate"] = note["tmdate"]
                        return
        raise KeyError(review_id)

    # -- faults -------------------------------------------------------------
    def fail_next(self, n: int = 1, *, status: int = 429, mode: str = "status", retry_after: float | None = 1,
                  reset_in_s: float | None = None, path: str | None = None) -> None:
        """Answer the next ``n`` requests (to ``path`` if given) with a fault.

        ``mode``: ``status`` (JSON error; 429 is OpenReview's RateLimitError shape, with
        ``Retry-After`` when ``retry_after`` is set and ``details.resetTime`` when ``reset_in_s`` is),
        ``html`` (a text/html page with ``status``, e.g. 200 or 502) or ``close`` (drop the connection).
        """
        if mode not in ("status", "html", "close"):
            raise ValueError(f"unknown fault mode {mode!r}")
        with self._lock:
            self._faults.append({"n": n, "status": status, "mode": mode, "retry_after": retry_after,
                                 "reset_in_s": reset_in_s, "path": path})

    def clear_faults(self) -> None:
        """Forget pending faults."""
        with self._lock:
            self._faults.clear()

    def _take_fault(self, path: str) -> dict[str, Any] | None:
        with self._lock:
            for fault in self._faults:
                if fault["path"] is None or path.startswith(fault["path"]):
                    fault["n"] -= 1
                    if fault["n"] <= 0:
                        self._faults.remove(fault)
                    return dict(fault)
        return None

    def hold(self, path: str, nth: int) -> Hold:
        """The ``nth`` request to ``path`` from now on blocks until :meth:`Hold.release` (see :class:`Hold`)."""
        hold = Hold(path, nth)
        with self._lock:
            self._holds.append(hold)
        return hold

    def _take_hold(self, path: str) -> Hold | None:
        with self._lock:
            for hold in self._holds:
                if path.startswith(hold.path):
                    hold.seen += 1
                    if hold.seen == hold.nth:
                        self._holds.remove(hold)
                        return hold
        return None

    def requests_to(self, path: str) -> list[dict[str, Any]]:
        """The recorded requests to one path."""
        return [r for r in self.requests if r["path"] == path]

    # -- answers ------------------------------------------------------------
    def _matches(self, note: dict[str, Any], query: dict[str, str]) -> bool:
        invitation = query.get("invitation")
        if invitation is not None:
            own = note.get("invitations") if self.api == "v2" else [note.get("invitation")]
            if invitation not in (own or []):
                return False
        if "id" in query and note["id"] != query["id"]:
            return False
        for key, value in query.items():
            if key.startswith("content."):
                field = (note.get("content") or {}).get(key[len("content."):])
                field = field.get("value") if isinstance(field, dict) else field
                if field != value:
                    return False
        return True

    def notes(self, query: dict[str, str]) -> dict[str, Any]:
        """The body of ``GET /notes`` for a query."""
        with self._lock:
            found = sorted((n for n in self.submissions.values() if self._matches(n, query)), key=lambda n: n["id"])
            count = len(found)
            if query.get("after"):
                found = [n for n in found if n["id"] > query["after"]]
            offset = int(query.get("offset") or 0)
            limit = int(query.get("limit") or 1000)
            page = [copy.deepcopy(n) for n in found[offset:offset + limit]]
            details = query.get("details") or ""
            for note in page:
                replies = copy.deepcopy(self.replies.get(note["id"], []))
                if "directReplies" in details:
                    note["details"] = {"directReplies": [r for r in replies if r.get("replyto") == note["id"]],
                                       "replyCount": len(replies)}
                elif "replies" in details:
                    note["details"] = {"replies": replies, "replyCount": len(replies)}
        return {"notes": page, "count": count}


class Hold:
    """A request the fake keeps waiting: crash tests kill the client while it is provably mid-way.

    ``reached`` is set when the held request arrives (the client has done everything before it); the request then
    waits until :meth:`release` (call it after the kill; a safety limit frees the server thread after 300 s).
    """

    def __init__(self, path: str, nth: int) -> None:
        self.path, self.nth, self.seen = path, nth, 0
        self.reached = threading.Event()
        self._released = threading.Event()

    def block(self) -> None:
        self.reached.set()
        self._released.wait(timeout=300)

    def release(self) -> None:
        self._released.set()


def _error(status: int, name: str, message: str, **details: Any) -> dict[str, Any]:
    return {"name": name, "message": message, "status": status, "details": details}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: FakeOpenReview

    def log_message(self, *_args: Any) -> None:  # keep test output clean
        pass

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(obj).encode(), "application/json; charset=utf-8", headers)

    def _fault(self, fault: dict[str, Any]) -> None:
        if fault["mode"] == "close":
            self.close_connection = True
            self.connection.close()
            return
        status = fault["status"]
        if fault["mode"] == "html":
            page = f"<html><head><title>{status}</title></head><body><h1>Service busy</h1></body></html>"
            self._send(status, page.encode(), "text/html; charset=utf-8")
            return
        headers = {}
        if fault["retry_after"] is not None:
            headers["Retry-After"] = str(int(fault["retry_after"]))
        if status == 429:
            details: dict[str, Any] = {"limit": 36, "remaining": 0, "used": 37}
            if fault["reset_in_s"] is not None:
                reset = datetime.now(UTC) + timedelta(seconds=fault["reset_in_s"])
                details["resetTime"] = reset.isoformat(timespec="milliseconds").replace("+00:00", "Z")
            body = _error(429, "RateLimitError", "Too many requests: You have made 37 requests, surpassing the limit "
                          "of 36 requests.", **details)
        else:
            body = _error(status, "InternalServerError", "Something went wrong")
        self._json(status, body, headers)

    def do_GET(self) -> None:
        parsed = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
        state = self.state
        state.requests.append({"method": "GET", "path": parsed.path, "query": query, "t": time.monotonic()})
        hold = state._take_hold(parsed.path)
        if hold is not None:
            hold.block()
        fault = state._take_fault(parsed.path)
        if fault is not None:
            self._fault(fault)
            return
        if parsed.path == "/notes":
            self._json(200, state.notes(query))
        elif parsed.path == "/groups":
            group_id = query.get("id", "")
            if group_id in state.venues:
                self._json(200, {"groups": [{"id": group_id, "readers": ["everyone"], "members": []}]})
            else:
                self._json(404, _error(404, "NotFoundError", f"Group Not Found: {group_id}"))
        elif parsed.path in ("/pdf", "/attachment"):
            data = state.pdfs.get(query.get("id", ""))
            if data is None or (parsed.path == "/attachment" and query.get("name") != "pdf"):
                self._json(404, _error(404, "NotFoundError", "The PDF was not found"))
            else:
                self._send(200, data, "application/pdf")
        else:
            self._json(404, _error(404, "NotFoundError", f"No route {parsed.path}"))

    def do_POST(self) -> None:
        parsed = urlparse(self.path)
        self.state.requests.append({"method": "POST", "path": parsed.path, "query": {}, "t": time.monotonic()})
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self._json(404, _error(404, "NotFoundError", f"No route {parsed.path}"))
