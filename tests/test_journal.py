"""The job journal on its own: what is written is read back in order, junk is set aside."""

from __future__ import annotations

from daemon.service.commands import SayCommand
from daemon.service.journal import JobJournal


def test_recorded_jobs_come_back_in_order_until_done(tmp_path):
    journal = JobJournal(tmp_path / "jobs")
    first = journal.record(SayCommand(id="a", text="First.", priority="low"), 100.0)
    journal.record(SayCommand(id="b", text="Second.", output="publish", reply_topic="x/y"), 101.0)
    pending = JobJournal(tmp_path / "jobs").pending()  # as a new process sees it
    assert [(c.id, c.text, at) for c, at, _ in pending] == [
        ("a", "First.", 100.0),
        ("b", "Second.", 101.0),
    ]
    assert pending[1][0].reply_topic == "x/y" and pending[0][0].priority == "low"
    JobJournal.done(first)
    assert [c.id for c, _, _ in journal.pending()] == ["b"]


def test_an_unreadable_entry_is_set_aside_never_half_used(tmp_path):
    journal = JobJournal(tmp_path / "jobs")
    good = journal.record(SayCommand(id="good", text="Fine."), 1.0)
    broken = tmp_path / "jobs" / "00000000000000000001-bad.job.json"
    broken.write_text('{"accepted_at": 1, "command": {"text": 5}}')
    assert [path for _, _, path in journal.pending()] == [good]
    assert not broken.exists() and broken.with_suffix(".bad").exists()


def test_a_journal_that_cannot_be_written_says_why_and_records_nothing(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    journal = JobJournal(blocked / "jobs")
    assert "cannot use" in journal.describe()["problem"]
    assert journal.record(SayCommand(text="Lost?"), 1.0) is None and journal.pending() == []
