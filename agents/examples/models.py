"""Side-effect ledgers for the example agents: one row per effect actually performed."""

from django.db import models


class Refund(models.Model):
    refund_id = models.CharField(max_length=40, unique=True)
    order_id = models.CharField(max_length=40)
    amount_cents = models.PositiveIntegerField()
    thread_id = models.CharField(max_length=100, db_index=True)
    # Not unique on purpose: a repeated side effect must show up as a second row.
    idempotency_key = models.CharField(max_length=300, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.refund_id} {self.order_id} {self.amount_cents}"


class SentEmail(models.Model):
    to = models.EmailField()
    subject = models.CharField(max_length=300)
    body = models.TextField()
    thread_id = models.CharField(max_length=100, db_index=True)
    idempotency_key = models.CharField(max_length=300, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.to}: {self.subject}"
