"""The shipped example agents: refunds and outreach. Discovered at startup like admin.py."""

import uuid
from typing import Annotated, Any

from pydantic import EmailStr, Field, StringConstraints

from agents.examples.models import Refund, SentEmail
from agents.prebuilt import ToolAgent
from agents.registry import register
from agents.state import State, add_messages
from agents.tools import Approval, Decision, ToolContext, tool

DEMO_ORDERS: dict[str, dict[str, Any]] = {
    "ORD-1001": {"customer": "Ada Lovelace", "email": "ada@example.com", "total_cents": 4250},
    "ORD-1002": {"customer": "Grace Hopper", "email": "grace@example.com", "total_cents": 12999},
    "ORD-1003": {"customer": "Alan Turing", "email": "alan@example.com", "total_cents": 1999},
    "ORD-1004": {"customer": "Katherine Johnson", "email": "katherine@example.com", "total_cents": 58000},
}


# A blank order id is refused before any reviewer sees the request.
OrderId = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=40), Field(title="Order id")
]


def _money(cents: int) -> str:
    return f"${cents / 100:,.2f}"


def _refund_summary(args: dict[str, Any]) -> str:
    order = DEMO_ORDERS.get(str(args["order_id"]).upper(), {})
    to = order.get("customer") or "the customer"
    return f"Refund {_money(args['amount_cents'])} to {to} (order {args['order_id']})"


class ConversationState(State):
    messages: Annotated[list[dict[str, Any]], add_messages] = []


@tool
def lookup_order(order_id: OrderId) -> dict[str, Any]:
    """Look up an order by its id (like ORD-1001): customer, email, total and status."""
    return find_order(order_id)


def find_order(order_id: str) -> dict[str, Any]:
    """The demo order, as every version of the refunds agent's lookup_order returns it."""
    order = DEMO_ORDERS.get(order_id.strip().upper())
    if order is None:
        return {"error": "no such order"}
    return {"order_id": order_id.strip().upper(), **order, "status": "delivered"}


def record_refund(
    *, order_id: str, amount_cents: int, thread_id: str, idempotency_key: str
) -> dict[str, Any]:
    """Issue a refund (one row in the ledger of effects): every version of issue_refund's effect."""
    refund = Refund.objects.create(
        refund_id=f"rf_{uuid.uuid4().hex[:12]}",
        order_id=order_id,
        amount_cents=amount_cents,
        thread_id=thread_id,
        idempotency_key=idempotency_key,
    )
    return {
        "status": "issued",
        "refund_id": refund.refund_id,
        "order_id": order_id,
        "amount_cents": amount_cents,
    }


REFUND_APPROVAL = Approval(
    queue="refunds",
    decisions=(Decision.APPROVE, Decision.EDIT, Decision.REJECT, Decision.RESPOND),
    description=lambda a: (
        f"Refund **{_money(a['amount_cents'])}** to the customer of order `{a['order_id']}`."
    ),
    summary=_refund_summary,
    render="tools/refund.html",
    consequential=True,
)


@tool(approval=REFUND_APPROVAL)
def issue_refund(
    order_id: OrderId,
    amount_cents: Annotated[int, Field(gt=0, le=1_000_000, title="Amount", description="Amount in cents")],
    ctx: ToolContext,
) -> dict[str, Any]:
    """Refund money to the customer of an order. Moves money: a human approves it first."""
    return record_refund(
        order_id=order_id,
        amount_cents=amount_cents,
        thread_id=ctx.thread_id,
        idempotency_key=ctx.idempotency_key,
    )


@tool(
    approval=Approval(
        queue="outreach",
        decisions=(Decision.APPROVE, Decision.EDIT, Decision.REJECT),
        description="Send an email to `{to}`.",
        summary="Email {to}: “{subject}”",
        render="tools/email.html",
    )
)
def send_email(
    to: EmailStr,
    subject: Annotated[str, Field(min_length=1, max_length=200)],
    body: Annotated[str, Field(min_length=1, max_length=5000)],
    ctx: ToolContext,
) -> dict[str, Any]:
    """Send an email. Reaches a real person: a human approves it first."""
    email = SentEmail.objects.create(
        to=to, subject=subject, body=body, thread_id=ctx.thread_id, idempotency_key=ctx.idempotency_key
    )
    return {"status": "sent", "message_id": f"em_{email.pk}", "to": to, "subject": subject}


refunds = register(
    ToolAgent(
        name="refunds",
        description="Customer-support agent that looks up orders and issues refunds (refunds need approval).",
        state=ConversationState,
        system_prompt=(
            "You are a customer-support agent. Look up the order before refunding it. "
            "Refund at most the order total. Be brief."
        ),
        tools=[lookup_order, issue_refund],
    )
)

outreach = register(
    ToolAgent(
        name="outreach",
        description="Drafts and sends emails (every email needs approval; reviewers may edit it).",
        state=ConversationState,
        system_prompt="You draft short, polite emails and send them with send_email.",
        tools=[send_email],
    )
)

# The same agent written with other frameworks (each registers itself).
from agents.examples import refunds_langgraph, refunds_openai_agents, refunds_pydantic_ai  # noqa: E402, F401
