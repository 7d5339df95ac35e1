"""Every model change has its migration: a deploy's `migrate` builds the schema the code reads."""

import pytest
from django.core.management import call_command


@pytest.mark.django_db  # makemigrations checks the applied history against the files
def test_the_models_have_no_change_without_a_migration() -> None:
    try:
        call_command("makemigrations", "--check", "--dry-run", verbosity=0)
    except SystemExit as exit_:
        pytest.fail(f"makemigrations --check exited {exit_.code}: a model change has no migration")
