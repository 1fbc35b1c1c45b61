"""Can a submission inherit another's cached replies and their seal?  The issue 31 §3 attack, measured.

Usage: PYTHONPATH=. .venv/bin/python benchmarks/cache_inheritance.py [--papers 40] [--keep DIR]
       PYTHONPATH=. .venv/bin/python benchmarks/cache_inheritance.py --migrate DIR

Loopback only, no model: N made-up papers (three reviews each, reviews public in 2999), the human baseline's splits,
then through the scheduler's real ``queue`` job against one fake OpenAI-compatible endpoint that counts its calls:
a keyed submission is evaluated; the papers' reviews go public; a keyless submission naming the same base URL and
model is evaluated.  Prints, for each, the calls the endpoint got, the cached replies, the sealed reviews and how
many are dated before the reviews went public, as one JSON line.  ``--keep DIR`` leaves the data dir there (run it
with an older checkout on PYTHONPATH to make a store the old cache wrote); ``--migrate DIR`` opens such a store with
this code, which applies the pending migrations, and prints the copy's reviews and the migration's note.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet

from grebench.bench import run_bench
from grebench.endpoints import KeyVault
from grebench.scheduler import SchedulerService
from grebench.settings import load_settings
from grebench.store import PaperRecord, ReviewRecord, Store, open_store, utcnow
from grebench.submissions import SubmissionForm, SubmissionQueue
from tests.conftest import FAST_ENV, subject
from tests.fakes.openai_server import FakeOpenAIServer

RESOLVER = {"models.example.test": ["127.0.0.1"]}
KEY = "sk-benchmark-keyed-submitter"


def _papers(n: int) -> list[PaperRecord]:
    out = []
    for i in range(n):
        pid = f"paper{i}"
        body = f"Summary:\nPaper {i} studies {subject(i)}. It is fine.\n\nWeaknesses:\nIt lacks {subject(i)} baselines."
        reviews = [ReviewRecord(review_id=f"{pid}-r{r}", paper_id=pid, kind="official_review",
                                text=f"{body} Review {r}.", sections=[("Review", f"{body} Review {r}.")],
                                content={"review": f"{body} Review {r}."}) for r in range(3)]
        out.append(PaperRecord(paper_id=pid, venue_id="Bench.cc/2019/Conference", title=f"Title {i}", source="test",
                               abstract=f"We study {subject(i)}.", reviews_public_at=datetime(2999, 1, 1),
                               reviews=reviews))
    return out


def _reviews(store: Store, name: str) -> dict[str, Any]:
    rows = store.rows("SELECT g.sealed, g.generated_at < p.reviews_public_at AS early FROM generations g "
                      "JOIN papers p USING (paper_id) WHERE g.candidate = ? AND g.status = 'ok'", [name])
    return {"reviews": len(rows), "sealed": sum(bool(r["sealed"]) for r in rows),
            "dated_before_public": sum(bool(r["early"]) for r in rows)}


def attack(data: Path, papers: int) -> dict[str, Any]:
    """Run the two submissions; what each got."""
    data.mkdir(parents=True, exist_ok=True)
    config = data / "grebench.toml"
    config.write_text('app_host = "127.0.0.2"\nsubmission_http_allowlist = "models.example.test"\n'
                      'submission_private_allowlist = "127.0.0.1/32"\nllm_max_retries = 0\n')
    settings = load_settings(config, env={**FAST_ENV, "GREBENCH_DATA_DIR": str(data)})
    store = open_store(settings.db_path)
    vault = KeyVault(env={"GREBENCH_SECRET_KEY": Fernet.generate_key().decode()})
    queue = SubmissionQueue(data / "queue.duckdb")
    out: dict[str, Any] = {}
    try:
        with store.transaction():
            for paper in _papers(papers):
                store.upsert_paper(paper)
        run_bench(store, settings, store.start_run("bench", {}))
        service = SchedulerService(settings, store, vault=vault, queue=queue, kinds=["queue"], resolver=RESOLVER)
        with FakeOpenAIServer() as server:
            url = f"http://models.example.test:{server.port}/v1"
            forms = [("keyed", {"model_name": "Keyed-Model", "api_key": KEY}),
                     ("keyless_copy", {"model_name": "Keyless-Copy", "model_string": "openai/Keyed-Model"})]
            public_at = None
            for label, fields in forms:
                before = len(server.chat_requests)
                sub = queue.submit(SubmissionForm(base_url=url, released="2019-09-01", cutoff="2019-06-01",
                                                  contact=f"{label}@example.org", **fields), settings, vault, RESOLVER)
                assert sub["ok"], sub
                [done] = service.run_job("queue")["summary"]["evaluated"]
                out[label] = {"endpoint_calls": len(server.chat_requests) - before, "cached": done.get("cached"),
                              **_reviews(store, fields["model_name"])}
                if public_at is None:  # the reviews go public between the two evaluations
                    public_at = utcnow()
                    store.con.execute("UPDATE papers SET reviews_public_at = ?", [public_at])
    finally:
        store.close()
    return out


def migrate(data: Path) -> dict[str, Any]:
    """Open a store (applying pending migrations); the copy's reviews and the migration's note."""
    store = open_store(data / "grebench.duckdb")
    try:
        notes = store.rows("SELECT detail FROM board_changes WHERE subject = 'call cache'")
        return {"keyed": _reviews(store, "Keyed-Model"), "keyless_copy": _reviews(store, "Keyless-Copy"),
                "note": notes[0]["detail"] if notes else None}
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=40, help="made-up papers to review")
    parser.add_argument("--keep", type=Path, help="leave the data dir here")
    parser.add_argument("--migrate", type=Path, help="open this data dir's store with this code and report")
    args = parser.parse_args()
    if args.migrate:
        print(json.dumps(migrate(args.migrate), default=str))
        return
    data = args.keep or Path(tempfile.mkdtemp(prefix="cache-inheritance-"))
    try:
        print(json.dumps(attack(data, args.papers), default=str))
    finally:
        if args.keep is None:
            shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
