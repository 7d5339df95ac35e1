"""A thread's checkpoints as a tree of branches: the current line first, then every fork."""

from collections import defaultdict
from dataclasses import dataclass, field

from checkpoints.backends.base import CheckpointSummary


@dataclass(frozen=True)
class Row:
    """One checkpoint of a branch, with the branches that fork from it."""

    checkpoint: CheckpointSummary
    forks: list["Branch"]


@dataclass
class Branch:
    """A run of checkpoints, each the child of the one before it."""

    checkpoints: list[CheckpointSummary]
    depth: int
    forked_from: CheckpointSummary | None = None
    current: bool = False
    """True for the branch that ends at the head."""
    branches: list["Branch"] = field(default_factory=list)

    @property
    def rows(self) -> list[Row]:
        """The checkpoints in order, each followed by the branches that left from it: drawn
        this way a fork hangs from its true fork point, not from the end of the line."""
        forks: dict[str, list[Branch]] = defaultdict(list)
        for branch in self.branches:
            if branch.forked_from is not None:
                forks[branch.forked_from.id].append(branch)
        return [Row(checkpoint=c, forks=forks.get(c.id, [])) for c in self.checkpoints]


def build_tree(checkpoints: list[CheckpointSummary], *, head_id: str | None) -> list[Branch]:
    """Group checkpoints into branches. Children on the way to the head continue a branch;
    other children start a nested branch under the checkpoint they forked from."""
    by_id = {c.id: c for c in checkpoints}
    children: dict[str | None, list[CheckpointSummary]] = defaultdict(list)
    for c in sorted(checkpoints, key=lambda c: (c.created_at, c.step)):
        children[c.parent_id if c.parent_id in by_id else None].append(c)
    on_head_path = _ancestors(by_id, head_id)
    roots = children[None]
    return [_branch(root, children, on_head_path, depth=0, forked_from=None) for root in roots]


def _ancestors(by_id: dict[str, CheckpointSummary], head_id: str | None) -> set[str]:
    path: set[str] = set()
    node = by_id.get(head_id or "")
    while node is not None and node.id not in path:
        path.add(node.id)
        node = by_id.get(node.parent_id or "")
    return path


def _branch(
    start: CheckpointSummary,
    children: dict[str | None, list[CheckpointSummary]],
    on_head_path: set[str],
    *,
    depth: int,
    forked_from: CheckpointSummary | None,
) -> Branch:
    branch = Branch(checkpoints=[], depth=depth, forked_from=forked_from, current=start.id in on_head_path)
    node: CheckpointSummary | None = start
    while node is not None:
        branch.checkpoints.append(node)
        kids = sorted(children[node.id], key=lambda c: c.id not in on_head_path)  # head path first
        for other in kids[1:]:
            branch.branches.append(_branch(other, children, on_head_path, depth=depth + 1, forked_from=node))
        node = kids[0] if kids else None
    return branch
