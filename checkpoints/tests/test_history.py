"""The history tree: a fork hangs from the checkpoint it left, not from the end of a line."""

from datetime import UTC, datetime, timedelta

from checkpoints.backends.base import CheckpointSummary
from checkpoints.history import build_tree
from checkpoints.models import CheckpointSource

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def summary(cid: str, parent: str | None, step: int, minute: int, source: str = "step") -> CheckpointSummary:
    return CheckpointSummary(
        id=cid,
        thread_id="t",
        parent_id=parent,
        step=step,
        source=CheckpointSource(source),
        next=[],
        node="",
        created_by="worker",
        schema_version=1,
        metadata={},
        digest="",
        size_bytes=0,
        created_at=T0 + timedelta(minutes=minute),
    )


def test_an_earlier_branch_is_drawn_under_its_fork_point_not_after_the_current_line() -> None:
    # a0 - a1 - a2 - a3 - a4 was the first run; then a fork from a1 ran on to f3.
    first = [summary(f"a{n}", f"a{n - 1}" if n else None, n, n) for n in range(5)]
    fork = [summary("f2", "a1", 2, 10, "fork"), summary("f3", "f2", 3, 11)]

    [main] = build_tree(first + fork, head_id="f3")

    assert [c.id for c in main.checkpoints] == ["a0", "a1", "f2", "f3"]
    forks_at = {row.checkpoint.id: [b.checkpoints[0].id for b in row.forks] for row in main.rows}
    assert forks_at == {"a0": [], "a1": ["a2"], "f2": [], "f3": []}
    [earlier] = main.rows[1].forks
    assert (earlier.current, earlier.forked_from and earlier.forked_from.id) == (False, "a1")
    assert [c.id for c in earlier.checkpoints] == ["a2", "a3", "a4"]
