"""The thread export document (format gatehouse.thread/1), as pydantic models.

An import is untrusted input: every field is typed and bounded here, and the tree is checked
(one root, parents listed before their children, steps that follow their parents, the head a
leaf). What a document says was decided is history, never a decision (see transfer.py).
"""

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from django.utils import timezone
from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)

from approvals.models import ApprovalStatus
from checkpoints.models import CheckpointSource, ThreadStatus

FORMAT = "gatehouse.thread/1"
CLOCK_SKEW = timedelta(minutes=5)
"""How far in the future an exported time may lie (another installation's clock)."""
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
"""No checkpoint was written before; a time before year 1 in UTC cannot even be stored."""

Id = Annotated[StrictStr, Field(min_length=1, max_length=100)]
Name = Annotated[StrictStr, Field(max_length=100)]
Text = Annotated[StrictStr, Field(max_length=20_000)]
JsonObject = dict[StrictStr, Any]


def _iso_8601(value: Any) -> datetime:
    """Only an ISO 8601 string, as exports write it: pydantic alone would take a number (or a
    string of digits) as seconds since 1970, and store 5 as 1970-01-01T00:00:05Z."""
    if not isinstance(value, str):
        raise ValueError(f"must be an ISO 8601 date-time string with an offset, not {type(value).__name__}")
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise ValueError("must be an ISO 8601 date-time string with an offset") from None


Time = Annotated[AwareDatetime, BeforeValidator(_iso_8601)]
"""A time with its UTC offset, as an ISO 8601 string (e.g. 2024-05-01T10:00:00+00:00)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ThreadDoc(_Strict):
    id: Annotated[StrictStr, Field(max_length=200)]
    """Where it came from (a label); the id to import under is checked by checkpoints.ids."""
    agent: Name
    status: ThreadStatus
    head: Id
    offline_model: StrictBool = False
    """Its model steps came from the built-in offline model (shown as a label)."""
    tenant: Annotated[StrictStr, Field(max_length=200)] | None = None
    """Its cross-thread store namespace, if it started with one (checked by checkpoints.ids);
    absent in documents exported before it was carried: those import untenanted."""


class CheckpointDoc(_Strict):
    id: Id
    parent_id: Id | None
    step: Annotated[StrictInt, Field(ge=0)]
    source: CheckpointSource
    node: Name
    next: Annotated[list[Name], Field(max_length=1)]
    created_by: Annotated[StrictStr, Field(max_length=200)]
    created_at: Time
    schema_version: Annotated[StrictInt, Field(ge=1)]
    metadata: JsonObject
    digest: Annotated[StrictStr, Field(max_length=100)]
    """Recomputed on import (values may be upgraded); carried only for the record."""
    values: JsonObject

    @model_validator(mode="after")
    def _a_time_it_could_have(self) -> "CheckpointDoc":
        if self.created_at > timezone.now() + CLOCK_SKEW:
            raise ValueError(
                f"checkpoint {self.id}: created_at {self.created_at.isoformat()} is in the future"
            )
        if self.created_at < EARLIEST:
            raise ValueError(f"checkpoint {self.id}: created_at {self.created_at.isoformat()} is before 1970")
        return self


class DecisionDoc(_Strict):
    checkpoint_id: Id
    key: Annotated[StrictStr, Field(min_length=1, max_length=200)]
    action: Name
    args: JsonObject | None
    status: ApprovalStatus
    decided_by: Annotated[StrictStr, Field(max_length=150)] | None
    decision_args: JsonObject | None
    message: Text
    imported: StrictBool = False
    """Already history in the exporting installation (it was imported there)."""


class ThreadDocument(_Strict):
    format: Literal["gatehouse.thread/1"]
    exported_at: Time
    thread: ThreadDoc
    checkpoints: Annotated[list[CheckpointDoc], Field(min_length=1, max_length=10_000)]
    decisions: Annotated[list[DecisionDoc], Field(max_length=10_000)] = []

    @model_validator(mode="after")
    def _a_tree(self) -> "ThreadDocument":
        by_id: dict[str, CheckpointDoc] = {}
        for c in self.checkpoints:
            # The first is the root (its parent may have been pruned); every other follows its parent.
            parent = by_id.get(c.parent_id or "")
            if c.id in by_id:
                raise ValueError(f"checkpoint {c.id} is listed twice")
            if by_id and c.parent_id is None:
                raise ValueError(f"checkpoint {c.id} is a second root: a thread has one first checkpoint")
            if by_id and parent is None:
                raise ValueError(f"checkpoint {c.id} must be listed after its parent {c.parent_id}")
            if parent is not None and c.step != parent.step + 1:
                raise ValueError(
                    f"checkpoint {c.id}: step {c.step} does not follow its parent's {parent.step}"
                )
            by_id[c.id] = c
        parents = {c.parent_id for c in self.checkpoints}
        if self.thread.head not in by_id:
            raise ValueError(f"the head {self.thread.head} is not among the checkpoints")
        if self.thread.head in parents:
            raise ValueError(f"the head {self.thread.head} must be a leaf (it has children)")
        unknown = sorted({d.checkpoint_id for d in self.decisions} - by_id.keys())
        if unknown:
            raise ValueError(f"decisions refer to unknown checkpoints: {', '.join(unknown[:5])}")
        return self

    def parents_first(self) -> list[CheckpointDoc]:
        """The checkpoints in an order to write them: each after its parent, the head last
        (so the imported head is where it was)."""
        head = self.thread.head
        return [c for c in self.checkpoints if c.id != head] + [c for c in self.checkpoints if c.id == head]


def parse_document(document: Any) -> ThreadDocument:
    """Validate a document; raise ValueError with a readable message naming the bad fields."""
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"not a Gatehouse thread export (expected format {FORMAT!r})")
    try:
        return ThreadDocument.model_validate(document)
    except ValidationError as exc:
        raise ValueError(describe(exc)) from exc


def describe(exc: ValidationError, *, limit: int = 5) -> str:
    problems = [
        f"{'.'.join(str(p) for p in e['loc']) or 'document'}: {e['msg']}" for e in exc.errors()[:limit]
    ]
    more = exc.error_count() - limit
    return "; ".join(problems) + (f" (and {more} more)" if more > 0 else "")
