import uuid

from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps


def first_generation(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    apps.get_model("approvals", "PolicyGeneration").objects.create(pk=1, value=uuid.uuid4().hex)


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0008_notification_outbox"),
    ]

    operations = [
        migrations.CreateModel(
            name="PolicyGeneration",
            fields=[
                ("id", models.PositiveSmallIntegerField(default=1, primary_key=True, serialize=False)),
                ("value", models.CharField(max_length=32)),
            ],
        ),
        migrations.RunPython(first_generation, migrations.RunPython.noop),
    ]
