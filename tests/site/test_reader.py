"""The app's reader cache: one build per export, computed views shared, readers never queued behind a rebuild."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from grebench.site import _data
from grebench.site._reader import APP_TABLES, ReaderCache, StampCache
from grebench.store import Store, open_store
from tests.site.conftest import fill_store


def _exported(tmp_path: Path) -> tuple[Store, Path]:
    store = open_store(None)
    fill_store(store)
    export = tmp_path / "export"
    store.export_parquet(export)
    return store, export


def test_only_the_app_tables_are_loaded(tmp_path: Path) -> None:
    store, export = _exported(tmp_path)
    assert (export / "llm_calls.parquet").exists() and (export / "logprob_cache.parquet").exists()
    cache = ReaderCache(export)
    with cache.reader() as reader:
        tables = {r["table_name"] for r in reader.rows("SELECT table_name FROM duckdb_tables()")}
        assert _data.has_table(reader, "clean_pairs")  # the view the Model tab's contamination window needs
        assert len(_data.paper_ids(reader)) == 6
    assert tables == set(APP_TABLES)
    store.con.close()


def test_a_view_is_computed_once_for_concurrent_readers(tmp_path: Path) -> None:
    store, export = _exported(tmp_path)
    cache = ReaderCache(export)
    calls: list[int] = []

    def slow_boards(reader: Store) -> list[dict]:
        calls.append(1)
        time.sleep(0.3)
        return _data.boards(reader)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _i: cache.view("boards", None, slow_boards), range(8)))
    assert len(calls) == 1 and cache.builds == 1
    assert all(r is results[0] for r in results) and len(results[0]) == 2
    store.con.close()


def test_readers_get_the_previous_export_while_one_rebuilds(tmp_path: Path) -> None:
    store, export = _exported(tmp_path)
    cache = ReaderCache(export)
    old = cache.snapshot()
    store.con.execute("DELETE FROM papers WHERE venue_id = 'ICLR.cc/2024/Conference'")
    store.export_parquet(export)
    with cache._build_lock:  # another request is rebuilding right now
        assert cache.snapshot() is old
    new = cache.snapshot()
    assert new.digest != old.digest and cache.builds == 2
    with cache.reader(new) as reader:
        assert len(_data.paper_ids(reader)) == 3
    with cache.reader(old) as reader:  # a request still reading the old data finishes on it
        assert len(_data.paper_ids(reader)) == 6
    store.con.close()


def test_views_are_bounded_and_dropped_with_their_export(tmp_path: Path) -> None:
    store, export = _exported(tmp_path)
    cache = ReaderCache(export, max_views=3)
    for i in range(5):
        cache.view("n", i, lambda _r, i=i: i)
    assert len(cache._views) == 3 and cache.view_computes == 5
    cache.view("n", 4, lambda _r: -1)  # still cached
    assert cache.view_computes == 5
    store.con.execute("UPDATE papers SET title = 'changed'")
    store.export_parquet(export)
    assert cache.view("n", 4, lambda _r: -1) == -1 and len(cache._views) == 1
    store.con.close()


def test_stamp_cache_recomputes_on_a_new_stamp_or_clear() -> None:
    stamp = {"v": 1}
    computed: list[int] = []
    cache = StampCache(lambda: stamp["v"], lambda: computed.append(1) or len(computed))
    assert [cache.get(), cache.get()] == [1, 1]
    stamp["v"] = 2
    assert cache.get() == 2
    cache.clear()
    assert cache.get() == 3
    threads = [threading.Thread(target=cache.get) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(computed) == 3
