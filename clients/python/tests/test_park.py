"""Parking (issue 27 §5), the client's part: the spec's park_after_ms passes through submit() and is
refused by name when it cannot be right; a run summary's state "parked" reads as any state. No
daemon needed (the daemon's part: tests/daemon/park_test.cpp, tests/claude/claude_park_test.cpp)."""

import pytest

from metaharness.records import Record
from metaharness.spec import build_run_spec


def test_park_after_passes_through_submit_and_bad_values_are_refused_by_name():
    spec = build_run_spec({"adapter": "claude", "prompt": "p", "park_after_ms": 600000})
    assert spec["park_after_ms"] == 600000
    assert "park_after_ms" not in build_run_spec({"adapter": "claude", "prompt": "p", "park_after_ms": None})
    for bad in (-1, True, "10m", 30 * 24 * 3600 * 1000 + 1, 1.5):
        with pytest.raises(ValueError, match="park_after_ms"):
            build_run_spec({"adapter": "claude", "prompt": "p", "park_after_ms": bad})


def test_a_parked_run_summary_reads_its_state_and_no_pid():
    summary = Record({"run_id": "r", "state": "parked", "pid": None, "pending_decisions": 1,
                      "waiting_on_decision_since": "2026-12-06T21:00:00Z"})
    assert summary.state == "parked" and summary.pid is None and summary.pending_decisions == 1
