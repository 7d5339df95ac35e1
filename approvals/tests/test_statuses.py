"""The README's list of statuses is the models' list: a status the product never sets is not
promised, and one it sets is not missing."""

import re

from django.conf import settings

from approvals.models import ApprovalStatus
from checkpoints.models import ThreadStatus


def readme_statuses() -> tuple[list[str], list[str]]:
    readme = (settings.BASE_DIR / "README.md").read_text()
    paragraph = " ".join(readme.split("\nStatuses: ", 1)[1].split("\n\n", 1)[0].split())
    threads, approvals = paragraph.split("; approvals are ", 1)
    return re.findall(r"`([a-z]+)`", threads), re.findall(r"`([a-z]+)`", approvals)


def test_the_readme_lists_every_status_a_thread_or_an_approval_can_have_and_no_other() -> None:
    threads, approvals = readme_statuses()
    assert threads == list(ThreadStatus.values)
    assert approvals == list(ApprovalStatus.values)
