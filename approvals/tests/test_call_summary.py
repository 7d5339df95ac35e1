"""A call that already ran, as the fork dialog lists it: in its tool's own words."""

from approvals.templatetags.gatehouse import call_summary

ARGS = {"order_id": "ORD-1003", "amount_cents": 1999}


def test_a_call_reads_in_its_tools_words_whether_its_arguments_are_json_text_or_an_object() -> None:
    as_text = call_summary(
        {"tool": "issue_refund", "arguments": '{"order_id": "ORD-1003", "amount_cents": 1999}'}, "refunds"
    )
    as_object = call_summary({"tool": "issue_refund", "arguments": ARGS}, "refunds")

    assert as_text == as_object
    assert "$19.99" in as_text and "ORD-1003" in as_text and "{" not in as_text


def test_arguments_that_are_not_an_object_are_shown_as_written() -> None:
    assert (
        call_summary({"tool": "issue_refund", "arguments": "not json {"}, "refunds")
        == "issue_refund(not json {)"
    )
