from __future__ import annotations

import json
import logging

from common.jsonlog import JsonFormatter


def test_log_lines_are_json_with_extra_fields():
    record = logging.makeLogRecord(
        {"name": "tasks.scheduler", "levelname": "INFO", "msg": "tick: %d", "args": (3,), "submitted": ["a"]}
    )
    entry = json.loads(JsonFormatter().format(record))
    assert entry["message"] == "tick: 3"
    assert entry["logger"] == "tasks.scheduler"
    assert entry["submitted"] == ["a"]
    assert entry["time"].endswith("+00:00")
