"""The change tables (checkpoint diff, compare page, fork and edit previews) put each value under
its own header, and tell null and "" from a missing value; the history's notes on edits cut
at words, quote texts and not numbers."""

import html
import json
import re

import pytest
from django.template.loader import render_to_string
from django.test import Client

from approvals.actions.threads import do_edit_state
from approvals.thread_selectors import describe_changes
from checkpoints.backends import get_backend
from checkpoints.diff import Change, diff_values
from tests.factories import make_gate, make_user

ROW = re.compile(r'<tr class="diff-(\w+)">(.*?)</tr>', re.S)
CELL = re.compile(r"<td[^>]*>(.*?)</td>", re.S)


def rows(table: str) -> dict[str, list[str]]:
    """Each row's path: its before and after cells' text, in the order the headers name them."""
    found = {}
    for _kind, row in ROW.findall(table):
        cells = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in CELL.findall(row)]
        assert "colspan" not in row, "a value must sit under one header"
        found[cells[1]] = cells[2:]
    return found


def test_an_added_value_sits_under_after_and_a_removed_one_under_before() -> None:
    changes = diff_values({"gone": "old words", "kept": 1}, {"kept": 1, "new": "fresh words"})

    table = rows(render_to_string("approvals/_changes.html", {"changes": changes}))

    assert table == {"gone": ["old words", ""], "new": ["", "fresh words"]}
    thead = render_to_string("approvals/_changes.html", {"changes": changes})
    assert "<th>before</th><th>after</th>" in thead


def test_null_and_an_empty_text_show_as_such_not_as_blank_cells() -> None:
    changes = diff_values(
        {"prompt": "Please refund", "note": "x", "count": None},
        {"prompt": None, "note": "", "count": 3, "added_null": None},
    )

    table = rows(render_to_string("approvals/_changes.html", {"changes": changes}))

    assert table == {
        "added_null": ["", "null"],
        "count": ["null", "3"],
        "note": ["x", '""'],
        "prompt": ["Please refund", "null"],
    }


def test_a_history_note_cuts_at_a_word_with_an_ellipsis() -> None:
    change = Change(
        "changed", "messages[0].content", "Please refund order ORD-1001", "Please refund order ORD-1003"
    )

    assert (
        describe_changes([change])
        == "messages[0].content “…refund order ORD-1001” → “…refund order ORD-1003”"
    )


def test_a_history_note_cuts_a_long_text_after_a_whole_word() -> None:
    words = "Please refund order ORD-1001 because the parcel arrived broken and wants the money back"
    change = Change("changed", "prompt", words, words.replace("1001", "1003"))

    assert describe_changes([change]) == (
        "prompt “…refund order ORD-1001 because the…” → “…refund order ORD-1003 because the…”"
    )


def test_a_history_note_shows_numbers_and_null_unquoted_and_texts_quoted() -> None:
    changes = [
        Change("changed", "messages[2].content.total_cents", 58000, 30000),
        Change("changed", "prompt", "Please refund", None),
        Change("changed", "note", "", "checked"),
    ]

    assert describe_changes(changes, limit=3) == (
        "messages[2].content.total_cents 58000 → 30000; prompt “Please refund” → null; note “” → “checked”"
    )


@pytest.mark.django_db
def test_the_thread_page_notes_an_edited_amount_unquoted() -> None:
    olga = make_user("olga", "operator")
    request_ = make_gate()
    values = get_backend().get(thread_id=request_.thread_id).values
    values["messages"][-1]["tool_calls"][0]["function"]["arguments"] = json.dumps(
        {"order_id": "ORD-1001", "amount_cents": 3000}
    )
    do_edit_state(request_.thread_id, user=olga, values=values)
    page = Client()
    page.force_login(olga)

    shown = page.get(f"/threads/{request_.thread_id}/").content.decode()

    assert "arguments.amount_cents 4250 → 3000</div>" in shown
