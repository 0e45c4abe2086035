"""Streams written by a newer metaharness, served by a real daemon: the client keeps the fields it
does not know and refuses, by name, an event or a format tag it does not know."""

import json

import pytest

import metaharness
from conftest import Daemon


def plant(daemon, run_id, lines):
    """A closed run on disk, as a daemon finds it at start."""
    run_dir = daemon.run_dir(run_id)
    run_dir.mkdir(parents=True)
    events = []
    for seq, fields in enumerate(lines, start=1):
        line = {"format": "metaharness.event/1", "seq": seq, "run": run_id,
                "recorded_at": "2026-12-01T09:30:00.000Z"}
        line.update(fields)
        events.append(line)
    events.append({"format": "metaharness.event/1", "seq": len(lines) + 1, "run": run_id,
                   "recorded_at": "2026-12-01T09:30:01.000Z", "event": "stream.closed", "events": len(lines),
                   "reason": "completed", "run_id": run_id, "process": {"kind": "exited", "code": 0}})
    (run_dir / "events.jsonl").write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events))
    (run_dir / "run.json").write_text(json.dumps({"adapter": "claude", "owner_uid": 0, "labels": {}}))


@pytest.fixture
def newer():
    d = Daemon(name="disk")
    plant(d, "r-fields", [
        {"event": "warning", "code": "FUTURE", "message": "from a newer writer", "severity": "low"},
        {"event": "text", "text": "hello", "request_id": None, "tone": {"dry": True}},
    ])
    plant(d, "r-event", [
        {"event": "text", "text": "before", "request_id": None},
        {"event": "tool.teleported", "call_id": "toolu_x"},
    ])
    plant(d, "r-format", [
        {"event": "text", "text": "before", "request_id": None},
        {"format": "metaharness.event/2", "event": "text", "text": "after", "request_id": None},
    ])
    d.start()
    yield metaharness.Client(d.socket, timeout=30)
    d.stop()


def test_unknown_fields_of_known_events_are_kept_through_the_daemon(newer):
    events = list(newer.tail("r-fields", timeout=30))
    assert [e.event for e in events] == ["warning", "text", "stream.closed"]
    warning, text, closed = events
    assert warning.code == "FUTURE" and warning.extra == {"severity": "low"} and warning.severity == "low"
    assert text.text == "hello" and text.tone == {"dry": True}
    assert closed.extra == {} and closed.reason == "completed"


@pytest.mark.parametrize("make", [lambda c, r: c.tail(r, timeout=30), lambda c, r: c.attach(r, timeout=30)])
def test_an_unknown_event_name_is_refused_by_name_after_the_lines_before_it(newer, make):
    stream = make(newer, "r-event")
    first = next(stream)
    assert first.event == "text" and first.text == "before"
    with pytest.raises(metaharness.UnknownEvent, match="tool.teleported") as refused:
        next(stream)
    assert refused.value.name == "tool.teleported"
    stream.close()


def test_an_unknown_format_tag_is_refused_by_name(newer):
    stream = newer.tail("r-format", timeout=30)
    assert next(stream).text == "before"
    with pytest.raises(metaharness.UnknownFormat, match="metaharness.event/2") as refused:
        next(stream)
    assert refused.value.tag == "metaharness.event/2"
    stream.close()


def test_the_async_client_refuses_them_the_same_way(newer):
    import asyncio

    async def main():
        client = metaharness.AsyncClient(newer.socket_path, timeout=30)
        kept = [e async for e in client.tail("r-fields", timeout=30)]
        assert kept[0].severity == "low"
        with pytest.raises(metaharness.UnknownEvent, match="tool.teleported"):
            async with client.tail("r-event", timeout=30) as stream:
                async for _ in stream:
                    pass

    asyncio.run(asyncio.wait_for(main(), 60))
