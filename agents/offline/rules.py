"""The offline model's scripted, deterministic replies for the shipped example agents.

Pure functions over OpenAI chat messages: no Django, no I/O. The same conversation always gets
the same reply, tool call ids included, so a replayed step sees exactly what it saw before.
"""

import hashlib
import json
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

Message = dict[str, Any]

# Mirror agents.prebuilt's prefixes (a test keeps them equal); importing them would pull the
# openai client into this pure module.
REJECTED_PREFIX = "Rejected by a human reviewer: "
EXPIRED_PREFIX = "Rejected automatically, no reviewer decided in time: "
POLICY_PREFIX = "Rejected automatically by policy {policy}: "
# A policy's rejection names it ("'allowed domains' v1"): no reviewer decided, so none is credited.
POLICY_REJECTION = re.compile(
    re.escape(POLICY_PREFIX).replace(re.escape("{policy}"), r"(?P<policy>'.*?' v\d+)"), re.DOTALL
)
REJECTIONS = (REJECTED_PREFIX, EXPIRED_PREFIX, POLICY_PREFIX.split("{")[0])
ERROR_PREFIX = "Error:"
ASK_ORDER = "I can help with a refund. Which order is it? Please give the order number, like ORD-1001."
ASK_RECIPIENT = (
    "Who should I email? Please give me their email address (like ada@example.com) "
    "and what the email is about."
)
DEFAULT_TOPIC = "our conversation"
OUTPUT_TOOL = "final_result"  # pydantic-ai's tool for a structured output
SIGN_OFF = "— The Gatehouse team"

ORDER_ID = re.compile(r"\bORD-\d+\b", re.IGNORECASE)
# "$20", "$ 1,250.50", "20 dollars", "20.5 USD"; the lookbehind keeps "ORD-1001 dollars" out.
AMOUNT = re.compile(
    r"\$\s*(?P<sign>\d[\d,]*(?:\.\d{1,2})?)|(?<![\w.,-])(?P<word>\d[\d,]*(?:\.\d{1,2})?)\s*(?:dollars?|usd)\b",
    re.IGNORECASE,
)
EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
ABOUT = re.compile(r"\babout\s+(.+)", re.IGNORECASE)
DANGLING = re.compile(r"\s+(?:to|at|for)$", re.IGNORECASE)


@dataclass(frozen=True)
class Call:
    """A tool call the assistant made, with its arguments parsed."""

    id: str
    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Turn:
    """The last user message, and the tool calls and results that followed it."""

    user_text: str
    calls: list[Call]
    results: dict[str, str]

    def calls_named(self, name: str) -> list[Call]:
        """Return this turn's calls of one tool, in order."""
        return [c for c in self.calls if c.name == name]


def reply(messages: list[Message], tools: list[Message] | None) -> Message:
    """Return the next assistant message for a conversation, given the tools on offer."""
    messages = [m for m in messages or [] if isinstance(m, dict)]
    names = tool_names(tools)
    if {"lookup_order", "issue_refund"} <= names:
        return as_output(messages, refunds_reply(messages), tools)
    if "send_email" in names:
        return outreach_reply(messages)
    received = current_turn(messages).user_text[:200] or "(an empty message)"
    return text_message(f"(offline model) I received: {received}")


def as_output(messages: list[Message], message: Message, tools: list[Message] | None) -> Message:
    """A text reply as a call of pydantic-ai's output tool when one is on offer (an agent whose
    output_type is a model), its text in the output's first text field."""
    offered = [t.get("function") for t in tools or [] if isinstance(t, dict)]
    output = next((f for f in offered if isinstance(f, dict) and f.get("name") == OUTPUT_TOOL), None)
    if output is None or message.get("tool_calls"):
        return message
    text = first_text_field(output.get("parameters"))
    return tool_calls_message(messages, [(OUTPUT_TOOL, {text: message["content"]})]) if text else message


def as_json_output(message: Message, response_format: Any) -> Message:
    """A text reply as the JSON a `json_schema` response format asks for (the OpenAI Agents SDK's
    output_type), its text in the schema's first text field."""
    if not isinstance(response_format, dict) or response_format.get("type") != "json_schema":
        return message
    if message.get("tool_calls") or not isinstance(message.get("content"), str):
        return message
    described = response_format.get("json_schema")
    text = first_text_field(described.get("schema") if isinstance(described, dict) else None)
    return {**message, "content": json.dumps({text: message["content"]})} if text else message


def first_text_field(schema: Any) -> str | None:
    """The first string property of an object's JSON schema (None if it has none)."""
    fields = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(fields, dict):
        return None
    return next((k for k, v in fields.items() if isinstance(v, dict) and v.get("type") == "string"), None)


# --- The refunds agent ---------------------------------------------------------------------


def refunds_reply(messages: list[Message]) -> Message:
    """Look orders up, then propose refunds, then report what happened to them."""
    turn = current_turn(messages)
    if refunds := turn.calls_named("issue_refund"):
        return text_message(" ".join(refund_outcome(c, turn.results.get(c.id)) for c in refunds))
    if lookups := turn.calls_named("lookup_order"):
        return propose_refunds(messages, turn=turn, lookups=lookups)
    ids = order_ids(turn.user_text)
    if not ids:
        return text_message(ASK_ORDER)
    return tool_calls_message(messages, [("lookup_order", {"order_id": i}) for i in ids])


def propose_refunds(messages: list[Message], *, turn: Turn, lookups: list[Call]) -> Message:
    """Propose one issue_refund per order found; say which orders were not found."""
    # A stated amount is only unambiguous when there is a single order.
    amount = amount_cents(turn.user_text) if len(lookups) == 1 else None
    proposals: list[tuple[str, dict[str, Any]]] = []
    failures: list[str] = []
    for call in lookups:
        content = turn.results.get(call.id)
        result = parse_json(content)
        order_id = str(call.args.get("order_id") or "").upper() or "(unknown)"
        if not isinstance(result, dict) or "error" in result:
            failures.append(sentence(f"I couldn't find order {order_id}: {lookup_error(result, content)}"))
            continue
        cents = amount if amount is not None else result.get("total_cents")
        if not is_int(cents):
            failures.append(f"I couldn't find a total for order {order_id}.")
            continue
        proposals.append(
            ("issue_refund", {"order_id": str(result.get("order_id") or order_id), "amount_cents": cents})
        )
    if not proposals:
        return text_message(" ".join(failures))
    return tool_calls_message(messages, proposals, content=" ".join(failures) or None)


def refund_outcome(call: Call, content: str | None) -> str:
    """Describe what became of one proposed refund, from its tool result."""
    order_id = str(call.args.get("order_id") or "(unknown)")
    if content is None:
        return f"I have no result yet for the refund on order {order_id}."
    result = parse_json(content)
    if isinstance(result, dict) and result.get("status") == "issued":
        # The result's amount, not the proposal's: a reviewer may have edited it.
        cents = result.get("amount_cents", call.args.get("amount_cents"))
        issued_for = result.get("order_id") or order_id
        refund_id = result.get("refund_id") or "without an id"
        return f"Refund of {dollars(cents)} issued for order {issued_for} (refund {refund_id})."
    if content.startswith(REJECTIONS):
        return sentence(f"I did not issue the refund for order {order_id}: {rejection_reason(content)}")
    if content.startswith(ERROR_PREFIX):
        return sentence(f"I could not issue the refund for order {order_id}: {error_text(content)}")
    return f"A reviewer responded about order {order_id}: {content}"


def order_ids(text: str) -> list[str]:
    """Return the order ids in a text, upper-cased, first occurrence first."""
    return list(dict.fromkeys(m.upper() for m in ORDER_ID.findall(text)))


def amount_cents(text: str) -> int | None:
    """Return the first money amount in a text, in cents, or None."""
    match = AMOUNT.search(text)
    if match is None:
        return None
    try:
        value = Decimal((match.group("sign") or match.group("word")).replace(",", ""))
    except InvalidOperation:
        return None
    return int(value * 100)


def dollars(cents: Any) -> str:
    """Format cents as $X.XX, without floating point."""
    if not is_int(cents):
        return "an unknown amount"
    sign = "-" if cents < 0 else ""
    return f"{sign}${abs(cents) // 100}.{abs(cents) % 100:02d}"


def lookup_error(result: Any, content: str | None) -> str:
    """Return why a lookup failed, from its parsed result or raw content."""
    if isinstance(result, dict):
        return str(result.get("error"))
    if not content:
        return "no result"
    return error_text(content)[:200]


# --- The outreach agent --------------------------------------------------------------------


def outreach_reply(messages: list[Message]) -> Message:
    """Draft an email to the address the user gave, then report what happened to it."""
    turn = current_turn(messages)
    if sends := turn.calls_named("send_email"):
        return text_message(" ".join(email_outcome(c, turn.results.get(c.id)) for c in sends))
    match = EMAIL.search(turn.user_text)
    if match is None:
        return text_message(ASK_RECIPIENT)
    topic = email_topic(turn.user_text)
    args = {"to": match.group(0), "subject": f"About {topic}", "body": email_body(topic)}
    return tool_calls_message(messages, [("send_email", args)])


def email_topic(text: str) -> str:
    """Return what the email is about: the words after "about", tidied."""
    match = ABOUT.search(text)
    if match is None:
        return DEFAULT_TOPIC
    # "about the launch to bob@example.com." -> "the launch"
    topic = " ".join(EMAIL.sub("", match.group(1)).split()).rstrip(".,!?;: ")
    topic = DANGLING.sub("", topic)[:80].rstrip(".,!?;: ")
    return topic or DEFAULT_TOPIC


def email_body(topic: str) -> str:
    """Return a short, polite email about a topic."""
    return (
        "Hello,\n\n"
        f"I'm writing to you about {topic}. Please let me know if you have any questions.\n\n"
        f"{SIGN_OFF}"
    )


def email_outcome(call: Call, content: str | None) -> str:
    """Describe what became of one proposed email, from its tool result."""
    if content is None:
        return "I have no result yet for the email."
    result = parse_json(content)
    if isinstance(result, dict) and result.get("status") == "sent":
        to = result.get("to") or call.args.get("to")
        subject = result.get("subject") or call.args.get("subject")
        return f'Sent the email to {to} with subject "{subject}".'
    if content.startswith(REJECTIONS):
        return sentence(f"I did not send the email: {rejection_reason(content)}")
    if content.startswith(ERROR_PREFIX):
        return sentence(f"I could not send the email: {error_text(content)}")
    return f"A reviewer responded: {content}"


# --- Reading the conversation --------------------------------------------------------------


def current_turn(messages: list[Message]) -> Turn:
    """Collect the last user message and the tool calls and results after it."""
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    start = users[-1] if users else -1
    calls: dict[str, Call] = {}  # by id: a reviewer's edit rewrites a call in place
    results: dict[str, str] = {}
    for message in messages[start + 1 :]:
        if message.get("role") == "assistant":
            calls.update((c.id, c) for c in parse_calls(message))
        elif message.get("role") == "tool":
            results[str(message.get("tool_call_id"))] = content_text(message)
    user_text = content_text(messages[start]) if users else ""
    return Turn(user_text=user_text, calls=list(calls.values()), results=results)


def parse_calls(message: Message) -> list[Call]:
    """Return an assistant message's function calls, skipping malformed ones."""
    calls = []
    raw_calls = message.get("tool_calls")
    # The endpoint refuses other shapes; the rules still never fail on them (pure callers).
    for raw in raw_calls if isinstance(raw_calls, list) else []:
        function = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(function, dict):
            continue
        arguments = function.get("arguments")
        args = arguments if isinstance(arguments, dict) else parse_json(arguments)
        calls.append(
            Call(
                id=str(raw.get("id")),
                name=str(function.get("name")),
                args=args if isinstance(args, dict) else {},
            )
        )
    return calls


def content_text(message: Message) -> str:
    """Return a message's text, whether its content is a string, parts or missing."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = (p.get("text") for p in content if isinstance(p, dict))
        return "".join(t for t in texts if isinstance(t, str))
    return ""


def tool_names(tools: list[Message] | None) -> set[str]:
    """Return the names of the function tools on offer."""
    names = set()
    for tool in tools or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.add(function["name"])
    return names


# --- Building replies ----------------------------------------------------------------------


def text_message(content: str) -> Message:
    """Return an assistant message that answers in text."""
    return {"role": "assistant", "content": content, "tool_calls": None}


def tool_calls_message(
    messages: list[Message], calls: list[tuple[str, dict[str, Any]]], *, content: str | None = None
) -> Message:
    """Return an assistant message making these calls, in parallel, with deterministic ids."""
    tool_calls = [
        {
            "id": call_id(messages, index=index, name=name),
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        for index, (name, args) in enumerate(calls)
    ]
    return {"role": "assistant", "content": content, "tool_calls": tool_calls}


def call_id(messages: list[Message], *, index: int, name: str) -> str:
    """Return a tool call id derived from the conversation so far, so a replay gets the same id."""
    digest = hashlib.sha256(f"{canonical_json(messages)}|{index}|{name}".encode()).hexdigest()
    return f"call_{digest[:24]}"


def canonical_json(value: Any) -> str:
    """Serialise a value the same way every time."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


# --- Small helpers -------------------------------------------------------------------------


def parse_json(content: Any) -> Any:
    """Parse a JSON string, or return None."""
    if not isinstance(content, str):
        return None
    try:
        return json.loads(content)
    except ValueError:
        return None


def is_int(value: Any) -> bool:
    """Tell whether a value is a real integer (bool is not)."""
    return isinstance(value, int) and not isinstance(value, bool)


def rejection_reason(content: str) -> str:
    """Return the reason after the rejection prefix: the reviewer's, or the expired gate's, or
    the policy's, with the policy named as what rejected it."""
    if match := POLICY_REJECTION.match(content):
        reason = content[match.end() :].strip() or "no reason given"
        return f"policy {match['policy']} rejected it automatically. {reason}"
    prefix = next(p for p in REJECTIONS if content.startswith(p))
    return content[len(prefix) :].strip() or "no reason given"


def error_text(content: str) -> str:
    """Return a tool error without its "Error:" prefix."""
    return content.removeprefix(ERROR_PREFIX).strip() or "unknown error"


def sentence(text: str) -> str:
    """End a text with a full stop unless it already ends a sentence."""
    return text if text.endswith((".", "!", "?")) else f"{text}."
