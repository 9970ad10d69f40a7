"""1,000 `say` commands as fast as the broker takes them (tools/soak.py makes the mix and keeps
the books): every message answered once, the queue bound held, every accepted job ended once,
no memory growth once warm, and the service still answers."""

from __future__ import annotations

import json

import pytest

from tests.daemon_helpers import Daemon, say
from tools.soak import Ledger, make_commands

pytestmark = pytest.mark.slow  # a service under load

MAX_JOBS = 50
RSS_GROWTH_BOUND = 30e6  # bytes, after a warm-up round; measured growth here: about 4 MB


def test_a_thousand_commands_keep_the_books_and_the_memory(broker, capture, tmp_path):
    daemon = Daemon(
        broker,
        tmp_path,
        capture.env(),
        cache={"enabled": True, "dir": str(tmp_path / "cache")},
        queue={"max_jobs": MAX_JOBS},
    )
    ledger = Ledger(MAX_JOBS)
    rss: list[int] = []
    read = 0

    def settle(published: int) -> None:
        """Feeds the ledger until every message was answered and every job ended."""

        def books_closed(topic: str, payload: bytes) -> bool:
            nonlocal read
            for seen_topic, seen_payload, _ in daemon.recorder.seen[read:]:
                read += 1
                if seen_topic == f"{daemon.base}/events":
                    ledger.add(json.loads(seen_payload))
            return ledger.settled(published)

        daemon.recorder.wait_for(books_closed, timeout=300, since=len(daemon.recorder.seen))

    def rss_now() -> int:
        """A stats reading taken after this call."""
        stats = daemon.recorder.wait_for(
            lambda topic, _: topic == f"{daemon.base}/stats", since=len(daemon.recorder.seen)
        )
        return json.loads(stats[1])["rss_bytes"]

    try:
        published = 0
        for round_number, count in enumerate((300, 1000)):
            payloads = make_commands(count, daemon.base, seed=round_number)
            for payload in payloads:
                daemon.recorder.client.publish(f"{daemon.base}/say", payload, qos=1)
            published += len(payloads)
            settle(published)
            rss.append(rss_now())
        assert ledger.problems(published) == []
        figures = ledger.figures()
        assert figures["rejected"]["queue_full"] > 0  # the bound was reached, and held
        assert figures["rejected"]["invalid"] > 0 and figures["rejected"]["duplicate"] > 0
        assert rss[1] - rss[0] < RSS_GROWTH_BOUND, [r / 1e6 for r in rss]
        job = say(daemon, text="Still answering.")
        daemon.recorder.event(job, "finished")
    finally:
        daemon.stop()
