"""Stalls (issue 27 §2), the client's part: the spec's stall_after_ms and on_stall pass through
submit() and are refused by name when they cannot be right; a RUN_STALLED warning's figures read
typed. No daemon needed."""

import pytest

import metaharness
from metaharness.spec import build_run_spec

EV = "metaharness.event/1"


def test_the_stall_fields_pass_through_submit_and_bad_values_are_refused_by_name():
    spec = build_run_spec({"adapter": "claude", "prompt": "p", "stall_after_ms": 0, "on_stall": "halt"})
    assert spec["stall_after_ms"] == 0 and spec["on_stall"] == "halt"
    for bad, name in [({"stall_after_ms": -1}, "stall_after_ms"), ({"stall_after_ms": True}, "stall_after_ms"),
                      ({"stall_after_ms": "600s"}, "stall_after_ms"),
                      ({"stall_after_ms": 30 * 24 * 3600 * 1000 + 1}, "stall_after_ms"),
                      ({"on_stall": "kill"}, "on_stall")]:
        with pytest.raises(ValueError, match=name):
            build_run_spec({"adapter": "claude", "prompt": "p", **bad})


def test_a_run_stalled_warning_reads_its_figures_typed_and_other_warnings_have_none():
    stalled = metaharness.parse_line(
        '{"format":"%s","seq":4,"run":"r","event":"warning","code":"RUN_STALLED","message":"m",'
        '"stall":{"silent_ms":12000,"last_event":"tool.result","last_tool":"Bash","stall_after_ms":10000,'
        '"on_stall":"halt"}}' % EV)
    assert stalled.stall == metaharness.StallReport(12000, "tool.result", "Bash", 10000, "halt")
    other = metaharness.parse_line('{"format":"%s","seq":5,"run":"r","event":"warning","code":"X","message":"m"}' % EV)
    assert other.stall is None
    with pytest.raises(metaharness.MalformedLine):
        metaharness.parse_line('{"format":"%s","seq":6,"run":"r","event":"warning","code":"RUN_STALLED",'
                               '"message":"m","stall":{"silent_ms":"long"}}' % EV)
