"""The claim and undo forms go back to the page their `next` names. Any text there that is not a
path on this site — another site, or a word Django's redirect() would look up as a view's name
("0", "inbox": a NoReverseMatch, a 500) — sends the reviewer to the request's
page instead, and the claim or undo is done all the same."""

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pytest_django.fixtures import Settings

from approvals.actions.decisions import check_decision, do_decide
from approvals.models import ApprovalRequest, ApprovalStatus
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

NOT_A_PATH = ["0", "inbox", "https://evil.example/", "//evil.example/"]


@pytest.fixture
def rita() -> User:
    return make_user("rita", "reviewer")


def page(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("target", NOT_A_PATH)
def test_a_claim_whose_next_is_no_path_here_goes_to_the_requests_page(rita: User, target: str) -> None:
    gate = make_gate()

    answer = page(rita).post(f"/approvals/{gate.pk}/claim/", {"op": "claim", "next": target})

    assert (answer.status_code, answer["Location"]) == (302, f"/approvals/{gate.pk}/")
    assert ApprovalRequest.objects.get(pk=gate.pk).claimed_by == rita


@pytest.mark.parametrize("target", NOT_A_PATH)
def test_an_undo_whose_next_is_no_path_here_goes_to_the_requests_page(
    settings: Settings, rita: User, target: str
) -> None:
    settings.DECISION_UNDO_S = 60
    gate = make_gate()
    do_decide(gate, reviewer=rita, valid=check_decision(gate, user=rita, decision="approve"))

    answer = page(rita).post(f"/approvals/{gate.pk}/undo/", {"next": target})

    assert (answer.status_code, answer["Location"]) == (302, f"/approvals/{gate.pk}/")
    assert ApprovalRequest.objects.get(pk=gate.pk).status == ApprovalStatus.PENDING


def test_a_path_here_is_where_the_forms_go_back_to(rita: User) -> None:
    gate = make_gate()

    answer = page(rita).post(f"/approvals/{gate.pk}/claim/", {"op": "claim", "next": "/?queue=refunds"})

    assert (answer.status_code, answer["Location"]) == (302, "/?queue=refunds")
