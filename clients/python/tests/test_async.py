"""AsyncClient: the same requests and stream semantics, for asyncio."""

import asyncio

import pytest

import metaharness
from conftest import ReplyDroppingProxy, bash, standin_spec, write_script

ASK = {"decisions": "ask", "decision_deadline_ms": 120000}


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 120))


def test_requests(daemon):
    async def main():
        client = metaharness.AsyncClient(daemon.socket)
        status = await client.status()
        assert status.pid == daemon.proc.pid
        run_id = await client.submit(**standin_spec("bash_marker.json", decisions="observe"))
        events = [e async for e in client.tail(run_id, follow=True, timeout=60)]
        assert events[-1].event == "stream.closed" and events[-1].reason == "completed"
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert any(r.run_id == run_id for r in await client.list())
        assert (await client.get(run_id)).close_reason == "completed"
        with pytest.raises(metaharness.Refused) as refused:
            await client.get("no-such-run")
        assert refused.value.code == "UNKNOWN_RUN"
        with pytest.raises(metaharness.Refused) as refused:
            await client.submit(adapter="nosuchvendor", prompt="go")
        assert refused.value.code == "MALFORMED"

    run(main())


def test_commands_without_attaching(daemon):
    async def main():
        client = metaharness.AsyncClient(daemon.socket)
        run_id = await client.submit(**standin_spec("bash_marker.json", keep_open=True, **ASK))
        async with client.tail(run_id, follow=True, timeout=60) as stream:
            async for e in stream:
                if e.event == "tool.requested":
                    break
        assert (await client.decide(run_id, e.call_id, metaharness.Deny("no"))).ok
        assert (await client.decide(run_id, e.call_id, "allow")).code == "TOO_LATE"
        assert (await client.halt(run_id)).ok
        events = [e async for e in client.tail(run_id, follow=True, timeout=60)]
        assert events[-1].reason == "steer-halt"

    run(main())


def test_many_runs_governed_at_once_with_a_drop_in_the_middle(daemon, scripts):
    script = write_script(scripts, "two.json", [[bash("toolu_a", "touch a.txt"), bash("toolu_b", "touch b.txt"),
                                                 {"type": "text", "text": "Done."}]])

    async def govern(client, run_id, drop_after_first):
        decided, offers, seqs = {}, [], []
        async with client.attach(run_id, timeout=60) as attachment:
            async for item in attachment:
                if isinstance(item, metaharness.Pending):
                    offers.append(item)
                    if drop_after_first and len(offers) == 1:
                        attachment._conn._writer.transport.abort()  # the connection breaks
                        continue
                    decision = metaharness.Allow() if item.call_id == "toolu_a" else metaharness.Deny("b is out")
                    assert (await attachment.decide(item.call_id, decision)).ok
                else:
                    seqs.append(item.seq)
                    if item.event == "tool.decided":
                        decided[item.call_id] = item.decision
            return decided, offers, seqs, attachment.connections

    async def main():
        client = metaharness.AsyncClient(daemon.socket)
        ids = [await client.submit(**standin_spec(script, **ASK)) for _ in range(6)]
        results = await asyncio.gather(*(govern(client, i, n == 0) for n, i in enumerate(ids)))
        for n, (decided, offers, seqs, connections) in enumerate(results):
            assert decided == {"toolu_a": metaharness.Allow(), "toolu_b": metaharness.Deny("b is out")}
            assert seqs == list(range(1, len(daemon.events_file(ids[n])) + 1))
            assert connections == (2 if n == 0 else 1)
            if n == 0:
                assert [o.call_id for o in offers] == ["toolu_a", "toolu_a", "toolu_b"] and offers[1].reoffered

    run(main())


def test_a_decision_from_another_task_while_one_task_waits_for_the_next_line(daemon):
    async def main():
        client = metaharness.AsyncClient(daemon.socket)
        run_id = await client.submit(**standin_spec("bash_marker.json", **ASK))
        async for e in client.tail(run_id, follow=True, timeout=60):
            if e.event == "usage":  # the last line before the run waits for the decision
                break
        attachment = client.attach(run_id, from_seq=0, timeout=60)
        queue = asyncio.Queue()

        async def reader():
            async for item in attachment:
                await queue.put(item)
            await queue.put(None)

        task = asyncio.create_task(reader())
        offer = await asyncio.wait_for(queue.get(), 60)
        assert isinstance(offer, metaharness.Pending)
        # The reader now waits for a line that only the decision brings, holding the read lock.
        assert attachment._lock.locked()
        assert (await attachment.decide(offer.call_id, "allow", timeout=30)).ok
        items = []
        while (item := await asyncio.wait_for(queue.get(), 60)) is not None:
            items.append(item)
        await task
        attachment.close()
        assert [i.event for i in items][-1] == "stream.closed"
        assert any(i.event == "tool.decided" and i.decision == metaharness.Allow() for i in items)

    run(main())


def test_every_command_of_the_async_client_and_attachment_gets_its_one_result(daemon, scripts, tmp_path):
    from conftest import sealed_frame

    script = write_script(scripts, "held.json", [[{"type": "text", "text": "first"}], [{"type": "idle"}],
                                                 [{"type": "idle"}]])
    frame = sealed_frame(tmp_path, ["file.read"])

    async def main():
        client = metaharness.AsyncClient(daemon.socket)
        run_id = await client.submit(**standin_spec(script, decisions="frame", keep_open=True))
        outcomes = []
        async with client.attach(run_id, timeout=60) as run:
            async for e in run:
                if e.event == "turn.ended":
                    break
            outcomes.append(await run.set_frame(frame))
            assert outcomes[-1].ok and outcomes[-1].applies_at
            outcomes.append(await run.inject("second"))
            assert outcomes[-1].ok
            async for e in run:
                if e.event == "turn.started":
                    break
            outcomes.append(await run.steer("faster"))
            assert outcomes[-1].code == "UNSUPPORTED_CONTROL"
            outcomes.append(await run.set_permission("plan"))
            assert outcomes[-1].code == "SHADOWED"
            outcomes.append(await run.interrupt("stop"))
            assert outcomes[-1].ok
            # The same commands without the attachment.
            async for e in run:
                if e.event == "turn.ended" and e.turn == 2:
                    break
            outcomes.append(await client.set_frame(run_id, frame))
            assert outcomes[-1].ok
            outcomes.append(await client.inject(run_id, "third"))
            assert outcomes[-1].ok
            async for e in run:
                if e.event == "turn.started" and e.turn == 3:
                    break
            outcomes.append(await client.steer(run_id, "faster"))
            assert outcomes[-1].code == "UNSUPPORTED_CONTROL"
            outcomes.append(await client.set_permission(run_id, "plan"))
            assert outcomes[-1].code == "SHADOWED"
            outcomes.append(await client.interrupt(run_id))
            assert outcomes[-1].ok
            outcomes.append(await run.halt("done"))
            assert outcomes[-1].ok
            rest = [e async for e in run]
        assert rest[-1].event == "stream.closed" and rest[-1].reason == "steer-halt"
        results = [e async for e in client.tail(run_id) if e.event == "command.result"]
        assert sorted(r.id for r in results) == sorted(o.command_id for o in outcomes)

    run(main())


def test_an_async_submit_whose_reply_is_lost_is_sent_again_and_makes_one_run(daemon, tmp_path):
    async def main():
        proxy = ReplyDroppingProxy(tmp_path / "proxy.sock", daemon.socket, drop=1)
        try:
            run_id = await metaharness.AsyncClient(proxy.path, timeout=60).submit(
                **standin_spec("bash_marker.json", decisions="observe", labels={"async-lost-reply": str(tmp_path)}))
        finally:
            proxy.close()
        submits = [r for r in proxy.requests if r["request"] == "submit"]
        assert len(submits) == 2 and submits[0]["request_id"] == submits[1]["request_id"]
        client = metaharness.AsyncClient(daemon.socket, timeout=60)
        runs = [r for r in await client.list() if (r.labels or {}).get("async-lost-reply") == str(tmp_path)]
        assert [r.run_id for r in runs] == [run_id]

    asyncio.run(main())


def test_async_shutdown():
    from conftest import Daemon

    d = Daemon(name="ashutdown").start()
    try:
        run(metaharness.AsyncClient(d.socket).shutdown())
        assert d.proc.wait(timeout=60) == 0
    finally:
        d.stop()
