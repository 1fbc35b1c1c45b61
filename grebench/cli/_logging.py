"""Log lines an operator can read and a machine can parse: every line starts with its time (ISO-8601, UTC, to the
millisecond); ``log_format = "json"`` (``GREBENCH_LOG_FORMAT=json``) makes each line one JSON object instead.

A JSON line has ``ts``, ``level``, ``logger`` and ``message``, the fields a record was given (``extra=``: a job's
``job``, ``event``, ``outcome``, ``duration_s``, ``run_id``), and ``exception`` with the traceback when there is one.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

#: What a log record holds whatever it says: everything else on it was handed in by ``extra=`` and is a field.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


def iso_time(created: float) -> str:
    """``2026-12-07T08:40:00.123Z``: the record's time in UTC, to the millisecond."""
    return datetime.fromtimestamp(created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class TextFormatter(logging.Formatter):
    """``2026-12-07T08:40:00.123Z INFO grebench.scheduler._service: job poll started``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """ISO-8601 in UTC, whatever the machine's time zone."""
        return iso_time(record.created)


class JsonFormatter(logging.Formatter):
    """One JSON object per line (see the module doc)."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON."""
        out = {"ts": iso_time(record.created), "level": record.levelname, "logger": record.name,
               "message": record.getMessage()}
        out.update({k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")})
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def formatter(log_format: str) -> logging.Formatter:
    """The formatter of the ``log_format`` setting (``text`` or ``json``)."""
    return JsonFormatter() if log_format == "json" else TextFormatter()
