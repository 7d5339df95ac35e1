"""Queues, approval requests, imported decisions, the notification outbox, the audit ledger and API
tokens, and the runs of the LangGraph server API."""

import hashlib
import uuid
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.validators import RegexValidator
from django.db import models

from checkpoints.fields import EncryptedJSONField, EncryptedTextField
from checkpoints.models import Checkpoint, Thread


class ApprovalStatus(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    EDITED = "edited"
    REJECTED = "rejected"
    RESPONDED = "responded"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"


DECIDED = (ApprovalStatus.APPROVED, ApprovalStatus.EDITED, ApprovalStatus.REJECTED, ApprovalStatus.RESPONDED)
RAN = (ApprovalStatus.APPROVED, ApprovalStatus.EDITED)
"""Decisions under which the gated tool runs."""


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
    # What a reviewer reads and writes is encrypted with CHECKPOINT_ENCRYPTION_KEY, when set.
    args = EncryptedJSONField()
    allowed_decisions = models.JSONField()
    description = EncryptedTextField(blank=True, default="")
    queue = models.CharField(max_length=64, default="default")
    state_digest = models.CharField(max_length=64, help_text="Digest of the checkpoint it was raised at.")
    status = models.CharField(max_length=16, choices=ApprovalStatus, default=ApprovalStatus.PENDING)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_args = EncryptedJSONField(null=True, blank=True)
    decision_message = EncryptedTextField(blank=True, default="")
    status_reason = models.CharField(max_length=300, blank=True, default="")
    # When the gate was first asked: a request re-asked after an edit or fork keeps its
    # original's, so it keeps its place in the queue (oldest first).
    created_at = models.DateTimeField(auto_now_add=True)
    supersedes = models.OneToOneField(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="replaced_by",
        help_text="The superseded request this one asks again (same gate, after an edit or fork).",
    )
    consequential = models.BooleanField(
        default=False, help_text="The tool is marked consequential: keyboard approval asks to confirm."
    )
    undo_until = models.DateTimeField(
        null=True,
        blank=True,
        help_text="The decision can be undone until then; empty once it took effect.",
    )
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
    # The policy that decided, routed or required it, as it was (name and version) at the gate.
    policy = models.ForeignKey(
        "Policy", null=True, blank=True, on_delete=models.SET_NULL, related_name="requests"
    )
    policy_name = models.CharField(max_length=100, blank=True, default="")
    policy_version = models.PositiveIntegerField(null=True, blank=True)
    required_approvals = models.PositiveSmallIntegerField(
        default=1, help_text="Different reviewers who must approve (a policy's require)."
    )
    required_groups = models.JSONField(
        default=list, blank=True, help_text="Approvers must be in one of these groups (none: any reviewer)."
    )

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["checkpoint", "key"], name="one_request_per_gate"),
        ]
        indexes = [
            models.Index(fields=["status", "queue", "created_at"]),
            models.Index(fields=["status", "expires_at"]),
            models.Index(fields=["status", "claim_active_at"]),
            # The model's order: the admin's list, the API's superseded list (newest first) and the
            # policy preview's recent requests read it from either end (each was a full scan and sort).
            models.Index(fields=["created_at", "id"], name="request_created_order"),
            # The API's decided lists: a status's newest decisions first, paged by (decided_at, id).
            models.Index(fields=["status", "decided_at", "id"], name="request_decided_order"),
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

    def hold_for(self, user: Any, *, now: datetime) -> None:
        """Set the claim to `user` (None: unclaimed) as of `now`; the caller saves it."""
        self.claimed_by = user
        self.claimed_at = now if user is not None else None
        self.claim_active_at = now if user is not None else None

    @property
    def is_decided(self) -> bool:
        return self.status in DECIDED

    @property
    def effective_args(self) -> dict[str, Any]:
        """The arguments the tool runs (or ran) with: the reviewer's edit, else the proposal."""
        return self.decision_args if self.decision_args is not None else self.args

    @property
    def policy_label(self) -> str:
        """How the deciding policy is named on pages: 'small refunds' v3."""
        return f"'{self.policy_name}' v{self.policy_version}" if self.policy_name else ""


class ImportedDecision(models.Model):
    """A decision an imported document listed at one of its checkpoints, kept for the record
    (exported again, marked imported); the runtime never reads it as a decision."""

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="imported_decisions")
    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.CASCADE, related_name="imported_decisions")
    position = models.PositiveIntegerField(help_text="Its place among the document's decisions.")
    # The tool's arguments, the edit and the reviewer's message: encrypted with
    # CHECKPOINT_ENCRYPTION_KEY, when set.
    record = EncryptedJSONField()

    class Meta:
        ordering = ["thread_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["thread", "position"], name="one_imported_decision_per_position"),
        ]

    def __str__(self) -> str:
        return f"{self.record.get('action', '')} on {self.thread_id} (imported)"


class NoticeStatus(models.TextChoices):
    QUEUED = "queued"
    SENDING = "sending"
    """Claimed by one try, which is sending it now; no other copy may send it meanwhile."""
    SENT = "sent"
    DROPPED = "dropped"
    """Not sent: the request was decided or moved on, or its notifier is no longer configured."""
    GAVE_UP = "gave_up"


class OutboxNotice(models.Model):
    """One notification for one notifier, written in the transaction of the event it tells of
    (the transactional outbox): a notice lost with the broker is resent by the sweep."""

    request = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE, related_name="notices")
    notifier = models.CharField(max_length=200, help_text="The notifier's dotted path.")
    event = models.CharField(max_length=32)
    event_queue = models.CharField(max_length=64, help_text="The queue the event happened in.")
    delivery_id = models.CharField(max_length=32, unique=True, help_text="Receivers drop duplicates by it.")
    status = models.CharField(max_length=16, choices=NoticeStatus, default=NoticeStatus.QUEUED)
    tries = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    touched_at = models.DateTimeField(help_text="When it was last handed to the broker or claimed by a try.")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["status", "touched_at"]),
            models.Index(fields=["status", "finished_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.event} of {self.request_id} to {self.notifier} ({self.status})"


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
    # Encrypted with CHECKPOINT_ENCRYPTION_KEY, when set; the hash covers the plaintext.
    data = EncryptedJSONField(default=dict)
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


class PolicyAction(models.TextChoices):
    APPROVE = "approve"
    DENY = "deny"
    ROUTE = "route"
    REQUIRE = "require"


class Policy(models.Model):
    """An admin's rule for a gated tool: when its CEL condition holds at a gate, it approves,
    denies, routes or requires N approvers. The first enabled match by `order` decides."""

    name = models.CharField(max_length=100)
    agent = models.CharField(max_length=100, blank=True, default="", help_text="Blank: every agent.")
    tool = models.CharField(max_length=100, help_text="The gated tool it applies to.")
    when = models.TextField(
        max_length=2000,
        default="true",
        help_text="A CEL condition over args, agent, tool, thread, effects and now.",
    )
    action = models.CharField(max_length=16, choices=PolicyAction)
    queue = models.CharField(max_length=64, blank=True, default="", help_text="For route: the queue.")
    approvers = models.PositiveSmallIntegerField(
        default=2, help_text="For require: how many different reviewers must approve."
    )
    groups = models.ManyToManyField(
        Group,
        blank=True,
        related_name="approval_policies",
        help_text="For require: approvers must be in one of these groups (none: any reviewer).",
    )
    message = models.CharField(
        max_length=500,
        blank=True,
        default="",
        help_text="The reason recorded (approve) or told the agent (deny).",
    )
    order = models.IntegerField(default=100, help_text="Lower runs first.")
    enabled = models.BooleanField(default=True)
    version = models.PositiveIntegerField(default=1, editable=False)
    # A standing decision is a policy scoped to one thread, optionally until a time.
    thread_id = models.CharField(max_length=100, blank=True, default="", db_index=True)
    until = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["order", "id"]
        verbose_name_plural = "policies"
        indexes = [models.Index(fields=["tool", "enabled"])]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"

    def clean(self) -> None:
        from approvals.policies import check_policy_fields

        check_policy_fields(when=self.when, action=self.action, queue=self.queue, approvers=self.approvers)


class PolicyGeneration(models.Model):
    """One row: the policies' generation, a fresh random value written in the transaction of
    every policy change (approvals/policy_cache.py). Each process caches a tool's policies under
    the value it read before them; a gate that reads another value reads the policies again.
    Random, not a counter: a value rolled back or flushed away is never written again for other
    policies."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    value = models.CharField(max_length=32)

    def __str__(self) -> str:
        return self.value


class Signoff(models.Model):
    """One reviewer's approval of a request that a policy requires several approvals for."""

    request = models.ForeignKey(ApprovalRequest, on_delete=models.CASCADE, related_name="signoffs")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    args = EncryptedJSONField(null=True, blank=True, help_text="The edited arguments, when this was an edit.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["request", "reviewer"], name="one_signoff_per_reviewer"),
        ]

    def __str__(self) -> str:
        return f"{self.reviewer} on {self.request_id}"


class RunOutcome(models.TextChoices):
    """How a LangGraph server run ended, as LangGraph's run statuses name it: a resume follows a
    run that stopped at an interrupt, a message one whose thread was done; a cancelled run was
    interrupted (LangGraph's runs.cancel)."""

    SUCCESS = "success"
    INTERRUPTED = "interrupted"


class LangGraphRun(models.Model):
    """A run a client of the LangGraph server API (/langgraph) started on a LangGraph agent's
    thread: a start, a message, or a resume. Its status while it is the thread's latest run is
    the thread's; the next run on the thread, or its cancel, stores how it ended."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    thread = models.ForeignKey(
        Thread, on_delete=models.CASCADE, related_name="langgraph_runs", db_index=False
    )
    assistant = models.CharField(max_length=100)
    metadata = models.JSONField(default=dict, blank=True)
    outcome = models.CharField(
        max_length=16,
        choices=RunOutcome,
        blank=True,
        default="",
        help_text="How it ended, stored as the next run began (blank: the thread's latest).",
    )
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    deletes_thread = models.BooleanField(
        default=False,
        help_text="A background stateless run's thread is deleted when the run ends (on_completion).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["thread", "-created_at"], name="langgraphrun_thread_recent")]

    def __str__(self) -> str:
        return f"run {self.id} on {self.thread_id}"
