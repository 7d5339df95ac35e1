"""Queues, approval requests, the audit ledger and API tokens."""

import hashlib

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.validators import RegexValidator
from django.db import models

from checkpoints.models import Checkpoint, Thread


class ApprovalStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    EDITED = "edited"
    REJECTED = "rejected"
    RESPONDED = "responded"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"
    CANCELLED = "cancelled"


class ExpiryAction(models.TextChoices):
    REJECT = "reject"
    ESCALATE = "escalate"


class Queue(models.Model):
    """Who may see and decide the requests of one queue (the name a gate's Approval gives).

    Open by default: a queue without a row here, or whose row lists no groups, is open to every
    reviewer. Listing groups restricts it to reviewers in at least one of them. Admins see all.
    """

    name = models.CharField(
        max_length=64,
        unique=True,
        validators=[
            RegexValidator(r"^[a-z0-9][a-z0-9_-]{0,63}$", "Use lowercase letters, digits, '-' or '_'.")
        ],
        help_text="The queue name a tool's Approval(queue=...) gives.",
    )
    description = models.CharField(max_length=200, blank=True, default="")
    groups = models.ManyToManyField(
        Group,
        blank=True,
        related_name="approval_queues",
        help_text="Reviewers in any of these groups see and decide this queue. None: every reviewer.",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ApprovalRequest(models.Model):
    """One gated action at one checkpoint, waiting for (or holding) a human decision."""

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="approval_requests")
    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.CASCADE, related_name="approval_requests")
    key = models.CharField(max_length=200, help_text="The tool call id.")
    agent = models.CharField(max_length=100)
    action = models.CharField(max_length=100)
    args = models.JSONField()
    allowed_decisions = models.JSONField()
    description = models.TextField(blank=True, default="")
    queue = models.CharField(max_length=64, default="default")
    state_digest = models.CharField(max_length=64, help_text="Digest of the checkpoint it was raised at.")
    status = models.CharField(max_length=16, choices=ApprovalStatus, default=ApprovalStatus.PENDING)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_args = models.JSONField(null=True, blank=True)
    decision_message = models.TextField(blank=True, default="")
    status_reason = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    # Claiming: one reviewer works on it; others see who. Released when idle for CLAIM_IDLE_S.
    claimed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    claimed_at = models.DateTimeField(null=True, blank=True)
    claim_active_at = models.DateTimeField(null=True, blank=True, help_text="The claimer's last activity.")
    # The gate's expiry policy, copied when the request opens (a later code change does not alter it).
    expires_at = models.DateTimeField(null=True, blank=True)
    expiry_action = models.CharField(max_length=16, choices=ExpiryAction, blank=True, default="")
    expiry_reason = models.CharField(max_length=300, blank=True, default="")
    escalate_to = models.CharField(max_length=64, blank=True, default="")
    escalated_from = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["checkpoint", "key"], name="one_request_per_gate"),
        ]
        indexes = [
            models.Index(fields=["status", "queue", "created_at"]),
            models.Index(fields=["status", "expires_at"]),
            models.Index(fields=["status", "claim_active_at"]),
        ]
        permissions = [("decide_approvalrequest", "Can decide approval requests")]

    def __str__(self) -> str:
        return f"{self.action} on {self.thread_id} ({self.status})"

    @property
    def is_pending(self) -> bool:
        return self.status == ApprovalStatus.PENDING

    @property
    def is_claimed(self) -> bool:
        return self.is_pending and self.claimed_by_id is not None


class AuditEvent(models.Model):
    """One human action. Events are hash-chained: each hash covers the previous one."""

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150)
    action = models.CharField(max_length=40)
    thread_id = models.CharField(max_length=100, db_index=True, blank=True, default="")
    checkpoint_id = models.CharField(max_length=64, blank=True, default="")
    approval = models.ForeignKey(
        ApprovalRequest, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events"
    )
    # The hash covers this copy of the id: deleting a thread (and its requests) nulls `approval`
    # but must not break the chain.
    approval_ref = models.BigIntegerField(null=True, blank=True)
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField()
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["action", "id"]), models.Index(fields=["actor_name", "id"])]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor_name} {self.action} {self.thread_id}"


class LedgerHead(models.Model):
    """A single row locked to append to the ledger one event at a time."""

    last_hash = models.CharField(max_length=64, default="0" * 64)

    def __str__(self) -> str:
        return self.last_hash


class ApiToken(models.Model):
    """A bearer token for the HTTP API. Only its SHA-256 is stored."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, default="default")
    token_hash = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=12, help_text="The first characters, to tell tokens apart.")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.user} {self.prefix}…"

    @staticmethod
    def hash_token(raw: str) -> str:
        return hashlib.sha256(raw.encode()).hexdigest()
