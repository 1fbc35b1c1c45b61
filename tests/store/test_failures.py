"""A file error in one line, whichever library raised it: the cause and the path (issue 64)."""

from __future__ import annotations

import errno
from pathlib import Path

import duckdb
import pytest

from grebench.store import failure_text, naming_path, removed_on_failure


@pytest.mark.parametrize(("exc", "said"), [
    (duckdb.IOException('IO Error: Could not write file "/d/grebench.duckdb.wal": No space left on device'),
     "no space left on device writing /d/grebench.duckdb.wal"),
    (duckdb.FatalException('FATAL Error: Failed to create checkpoint because of error: Could not write file '
                           '"/d/grebench.duckdb": No space left on device'),
     "no space left on device writing /d/grebench.duckdb"),
    (OSError(errno.ENOSPC, "No space left on device", "/d/site.building/index.html"),
     "no space left on device writing /d/site.building/index.html"),
    (OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device"),
     "no space left on device"),
    (OSError(errno.EACCES, "Permission denied", "/d/x"), "permission denied on /d/x"),
    (ValueError("bad"), "ValueError: bad"),
])
def test_failure_text_names_the_cause_and_the_file(exc: BaseException, said: str) -> None:
    assert failure_text(exc) == said


def test_a_writer_names_the_file_and_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "t.parquet.tmp"
    with pytest.raises(OSError) as caught, removed_on_failure(target):
        target.write_text("half")
        raise OSError(errno.ENOSPC, "Error writing bytes to file. Detail: [errno 28] No space left on device")
    assert not target.exists()
    assert failure_text(caught.value) == f"no space left on device writing {target}"
    with pytest.raises(OSError) as named, naming_path(tmp_path / "other"):
        raise OSError(errno.ENOSPC, "x", str(tmp_path / "own"))
    assert named.value.filename == str(tmp_path / "own")  # a file error that names its file keeps it
