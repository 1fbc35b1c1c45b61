"""What produced the numbers: the code version read from .git without running git, estimator ids in parts, and
no secret in what is published (issue 34 §3)."""

from __future__ import annotations

import json
from pathlib import Path

from grebench.scoring import estimator_facts, provenance
from grebench.scoring._provenance import git_commit
from grebench.store import Store, utcnow
from grebench.store._snapshot import MAX_MANIFEST_DEPTH, _depth

SHA = "0123456789abcdef0123456789abcdef01234567"
OTHER = "89abcdef0123456789abcdef0123456789abcdef"


def test_a_branch_checkout_names_its_commit(tmp_path: Path) -> None:
    (tmp_path / ".git" / "refs" / "heads").mkdir(parents=True)
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / ".git" / "refs" / "heads" / "main").write_text(SHA + "\n")
    assert git_commit(tmp_path) == SHA


def test_a_worktree_and_packed_refs_and_a_detached_head(tmp_path: Path) -> None:
    common = tmp_path / "main" / ".git"
    gitdir = common / "worktrees" / "wt"
    gitdir.mkdir(parents=True)
    (gitdir / "HEAD").write_text("ref: refs/heads/feature\n")
    (gitdir / "commondir").write_text("../..\n")
    (common / "packed-refs").write_text(f"# pack-refs with: peeled\n{OTHER} refs/heads/other\n"
                                        f"{SHA} refs/heads/feature\n")
    checkout = tmp_path / "wt"
    checkout.mkdir()
    (checkout / ".git").write_text(f"gitdir: {gitdir}\n")
    assert git_commit(checkout) == SHA
    (gitdir / "HEAD").write_text(OTHER + "\n")
    assert git_commit(checkout) == OTHER


def test_no_checkout_or_odd_files_give_none(tmp_path: Path) -> None:
    assert git_commit(tmp_path) is None  # an installed package: the package version says it
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/../../../etc/passwd\n")
    assert git_commit(tmp_path) is None
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/gone\n")
    assert git_commit(tmp_path) is None
    (tmp_path / ".git" / "HEAD").write_text("not a commit\n")
    assert git_commit(tmp_path) is None


def test_an_estimator_id_in_parts() -> None:
    facts = estimator_facts("hf:smollm2-135m@a672150f:dtype=bfloat16:chat=1a2b3c4d")
    assert (facts["kind"], facts["model"], facts["weights_sha8"], facts["dtype"]) == \
        ("hf", "smollm2-135m", "a672150f", "bfloat16")
    assert estimator_facts("offline:wb-bigram:lam=0.08")["kind"] == "offline"


def _board_with(store: Store, candidate: str) -> None:
    now = utcnow()
    store.con.execute("INSERT INTO boards (board_id, venue_id, venue, metric, estimator, preprocessor, scope, papers, "
                      "bootstrap_samples, seed, computed_at) VALUES ('b', 'V', 'V 2026', 'gem-s', "
                      "'hf:m@a672150f:dtype=float32', 'rules-v6', 'all', 3, 100, 7, ?)", [now])
    store.con.execute("INSERT INTO board_rows (board_id, candidate, kind, score, papers, pairs) "
                      "VALUES ('b', ?, 'llm', 0.1, 3, 6)", [candidate])


def test_a_key_never_appears_only_the_name_of_its_variable(store: Store) -> None:
    secret = "sk-live-0123456789secret"
    store.con.execute(
        "INSERT INTO candidates (name, kind, model, api_base, api_key_env, params_json, updated_at) "
        "VALUES ('paid', 'llm', 'openai/gpt-x', ?, 'PAID_API_KEY', ?, ?)",
        [f"https://user:{secret}@api.example.com:8443/v1?key={secret}",
         json.dumps({"temperature": 0, "max_tokens": 900, "api_key": secret,
                     "extra_headers": {"Authorization": secret}, "extra_body": {"a": {"b": {"c": [1]}}}}),
         utcnow()])
    _board_with(store, "paid")
    prov = provenance(store)
    assert secret not in json.dumps(prov)
    paid = prov["candidates"]["paid"]
    assert paid["api_key_env"] == "PAID_API_KEY" and paid["api_base"] == "https://api.example.com:8443/v1"
    assert paid["decoding"] == {"temperature": 0, "max_tokens": 900, "api_key": "[redacted]",
                                "extra_headers": '{"Authorization": "[redacted]"}',
                                "extra_body": '{"a": {"b": {"c": [1]}}}'}
    # it sits in a snapshot's manifest, whose nesting an importer bounds: a deep parameter never makes it refused
    assert _depth({"provenance": prov}, MAX_MANIFEST_DEPTH) <= MAX_MANIFEST_DEPTH
    assert prov["estimators"]["hf:m@a672150f:dtype=float32"]["dtype"] == "float32"
    assert prov["venues"]["V"]["aggregation"] == {"version": "boards-v7", "bootstrap_samples": 100, "seed": 7}
