"""A diff shows a change of a value's JSON type inside a list of plain values.

DeepDiff aligns a list of plain values by Python equality, where 0 == false and 1 == 1.0 ==
true: [0] to [false] was no change. The state editor saves such an edit (it compares as JSON),
but its diff, the fork preview's and the ledger's showed nothing. diff_values now shows it,
old -> new by path, and lists otherwise read as they did.
"""

import json
from typing import Any

import pytest

from checkpoints.diff import Change, diff_values


@pytest.mark.parametrize(
    "old,new",
    [(0, False), (1, True), (1, 1.0), (True, 1.0), (0.0, 0)],
    ids=["0-false", "1-true", "1-1.0", "true-1.0", "0.0-0"],
)
def test_a_type_only_change_in_a_list_is_shown(old: Any, new: Any) -> None:
    [change] = diff_values({"flags": ["a", old]}, {"flags": ["a", new]})

    assert (change.kind, change.path) == ("changed", "flags[1]")
    assert (repr(change.old), repr(change.new)) == (repr(old), repr(new))
    assert (change.old_text, change.new_text) == (json.dumps(old), json.dumps(new))


def test_it_is_shown_in_a_nested_list_beside_other_changes() -> None:
    changes = diff_values({"settings": {"limits": [1, 2]}}, {"settings": {"limits": [True, 2, 3]}})

    assert [(c.kind, c.path, c.old, c.new) for c in changes] == [
        ("changed", "settings.limits[0]", 1, True),
        ("added", "settings.limits[2]", None, 3),
    ]
    assert changes[0].new is True


@pytest.mark.parametrize(
    "old,new,expected",
    [
        ([1, 2, 3], [1, 3], [Change("removed", "xs[1]", 2, None)]),
        ([1, 2], [1, 2, 5], [Change("added", "xs[2]", None, 5)]),
        ([1, 2], [1, 7], [Change("changed", "xs[1]", 2, 7)]),
        ([1], ["1"], [Change("changed", "xs[0]", 1, "1")]),
        (["a", None], ["a", 0], [Change("changed", "xs[1]", None, 0)]),
        ([1, 2], {"a": 1}, [Change("changed", "xs", [1, 2], {"a": 1})]),
        ([1.5, 2], [1.5, 2], []),
    ],
)
def test_other_list_diffs_read_as_before(old: Any, new: Any, expected: list[Change]) -> None:
    assert diff_values({"xs": old}, {"xs": new}) == expected
