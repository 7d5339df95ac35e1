"""The built-in offline model: its scripted rules, its endpoint, and the real openai SDK against it."""

import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.test import override_settings

from agents import llm
from agents.management.commands.serve import web_command
from agents.offline import rules

REFUND_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "issue_refund", "parameters": {"type": "object"}}},
]
EMAIL_TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "send_email", "parameters": {"type": "object"}}}
]
SYSTEM: dict[str, Any] = {"role": "system", "content": "You are a customer-support agent."}
ORDER_1001 = {
    "order_id": "ORD-1001",
    "customer": "Ada Lovelace",
    "email": "ada@example.com",
    "total_cents": 4250,
    "status": "delivered",
}
URL = "/offline/v1/chat/completions"


def user(text: Any) -> dict[str, Any]:
    return {"role": "user", "content": text}


def tool_result(call: dict[str, Any], content: Any) -> dict[str, Any]:
    text = content if isinstance(content, str) else json.dumps(content)
    return {"role": "tool", "tool_call_id": call["id"], "content": text}


def args_of(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]]


def step(history: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Ask the rules for the next message and append it to the history, like the runtime does."""
    message = rules.reply(history, tools)
    history.append(message)
    return message


def refund_until_proposal(text: str, lookups: list[Any]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run a refunds conversation up to the refund proposal; return the history and the proposal."""
    history = [SYSTEM, user(text)]
    calls = step(history, REFUND_TOOLS)["tool_calls"]
    history += [tool_result(c, r) for c, r in zip(calls, lookups, strict=True)]
    return history, step(history, REFUND_TOOLS)


# --- rules: refunds --------------------------------------------------------------------------


def test_refunds_asks_for_the_order_number_when_none_is_given() -> None:
    message = rules.reply([SYSTEM, user("I want my money back")], REFUND_TOOLS)
    assert message == {"role": "assistant", "content": rules.ASK_ORDER, "tool_calls": None}


def test_refunds_looks_up_every_order_in_one_message() -> None:
    message = rules.reply([user("Refund ord-1001 and ORD-1002, and ORD-1001 again")], REFUND_TOOLS)
    assert message["content"] is None
    assert args_of(message) == [
        ("lookup_order", {"order_id": "ORD-1001"}),
        ("lookup_order", {"order_id": "ORD-1002"}),
    ]
    ids = [c["id"] for c in message["tool_calls"]]
    assert len(set(ids)) == 2
    assert all(i.startswith("call_") and len(i) == 5 + 24 for i in ids)


def test_refunds_proposes_the_order_total() -> None:
    _, proposal = refund_until_proposal("Please refund ORD-1001", [ORDER_1001])
    assert args_of(proposal) == [("issue_refund", {"order_id": "ORD-1001", "amount_cents": 4250})]


@pytest.mark.parametrize(
    ("text", "cents"),
    [("$20", 2000), ("$20.50", 2050), ("20 dollars", 2000), ("$1,250.5", 125050), ("12.99 USD", 1299)],
)
def test_refunds_proposes_the_stated_amount_for_a_single_order(text: str, cents: int) -> None:
    _, proposal = refund_until_proposal(f"Refund {text} on ORD-1001 please", [ORDER_1001])
    assert args_of(proposal) == [("issue_refund", {"order_id": "ORD-1001", "amount_cents": cents})]


def test_refunds_ignores_a_stated_amount_for_several_orders() -> None:
    order_2 = {**ORDER_1001, "order_id": "ORD-1002", "total_cents": 12999}
    _, proposal = refund_until_proposal("Refund $5 on ORD-1001 and ORD-1002", [ORDER_1001, order_2])
    assert args_of(proposal) == [
        ("issue_refund", {"order_id": "ORD-1001", "amount_cents": 4250}),
        ("issue_refund", {"order_id": "ORD-1002", "amount_cents": 12999}),
    ]


def test_refunds_reports_orders_that_were_not_found() -> None:
    _, answer = refund_until_proposal("Refund ORD-9", [{"error": "no such order"}])
    assert answer == {
        "role": "assistant",
        "content": "I couldn't find order ORD-9: no such order.",
        "tool_calls": None,
    }


def test_refunds_proposes_the_found_orders_and_mentions_the_missing_ones() -> None:
    _, proposal = refund_until_proposal("Refund ORD-1001 and ORD-9", [ORDER_1001, {"error": "no such order"}])
    assert proposal["content"] == "I couldn't find order ORD-9: no such order."
    assert args_of(proposal) == [("issue_refund", {"order_id": "ORD-1001", "amount_cents": 4250})]


def test_refunds_reports_the_issued_amount_from_the_result() -> None:
    history, proposal = refund_until_proposal("Refund ORD-1001", [ORDER_1001])
    issued = {"status": "issued", "refund_id": "rf_abc", "order_id": "ORD-1001", "amount_cents": 1000}
    history.append(tool_result(proposal["tool_calls"][0], issued))  # a reviewer edited 4250 -> 1000
    answer = step(history, REFUND_TOOLS)
    assert answer["tool_calls"] is None
    assert answer["content"] == "Refund of $10.00 issued for order ORD-1001 (refund rf_abc)."


def test_refunds_reports_rejections_responses_and_errors_one_sentence_each() -> None:
    orders = [{**ORDER_1001, "order_id": f"ORD-{n}"} for n in (1, 2, 3)]
    history, proposal = refund_until_proposal("Refund ORD-1, ORD-2 and ORD-3", orders)
    contents = [
        "Rejected by a human reviewer: over the limit",
        "Please call the customer first",
        "Error: amount_cents: must be greater than 0",
    ]
    history += [tool_result(c, r) for c, r in zip(proposal["tool_calls"], contents, strict=True)]
    assert step(history, REFUND_TOOLS)["content"] == (
        "I did not issue the refund for order ORD-1: over the limit. "
        "A reviewer responded about order ORD-2: Please call the customer first "
        "I could not issue the refund for order ORD-3: amount_cents: must be greater than 0."
    )


def test_refunds_reports_an_expired_gate_with_its_reason() -> None:
    history, proposal = refund_until_proposal("Refund ORD-1001", [ORDER_1001])
    expired = rules.EXPIRED_PREFIX + "No reviewer decided within 1 hour."
    history.append(tool_result(proposal["tool_calls"][0], expired))
    assert step(history, REFUND_TOOLS)["content"] == (
        "I did not issue the refund for order ORD-1001: No reviewer decided within 1 hour."
    )


def test_refunds_starts_over_after_a_new_user_message() -> None:
    history, proposal = refund_until_proposal("Refund ORD-1001", [ORDER_1001])
    history.append(tool_result(proposal["tool_calls"][0], "Rejected by a human reviewer: no"))
    step(history, REFUND_TOOLS)
    history.append(user("OK then refund $5 on ORD-1002"))
    assert args_of(step(history, REFUND_TOOLS)) == [("lookup_order", {"order_id": "ORD-1002"})]


def test_rejection_prefixes_match_the_tool_agent() -> None:
    from agents.prebuilt import EXPIRED_PREFIX, REJECTED_PREFIX

    assert (rules.REJECTED_PREFIX, rules.EXPIRED_PREFIX) == (REJECTED_PREFIX, EXPIRED_PREFIX)


# --- rules: outreach --------------------------------------------------------------------------


def test_outreach_asks_who_to_email() -> None:
    assert rules.reply([user("Send a nice note")], EMAIL_TOOLS)["content"] == rules.ASK_RECIPIENT


def test_outreach_drafts_an_email_about_the_topic() -> None:
    message = rules.reply([user("Email bob@example.com about the Q3 launch!")], EMAIL_TOOLS)
    [(name, args)] = args_of(message)
    assert name == "send_email"
    assert args["to"] == "bob@example.com"
    assert args["subject"] == "About the Q3 launch"
    assert "the Q3 launch" in args["body"]
    assert args["body"].endswith("— The Gatehouse team")


@pytest.mark.parametrize(
    ("text", "subject"),
    [
        ("Write to bob@example.com.", "About our conversation"),
        ("Write about the renewal to bob@example.com.", "About the renewal"),
    ],
)
def test_outreach_subject(text: str, subject: str) -> None:
    [(_, args)] = args_of(rules.reply([user(text)], EMAIL_TOOLS))
    assert args["subject"] == subject


@pytest.mark.parametrize(
    ("content", "answer"),
    [
        (
            {"status": "sent", "message_id": "em_1", "to": "carol@example.com", "subject": "Edited"},
            'Sent the email to carol@example.com with subject "Edited".',
        ),
        ({"status": "sent"}, 'Sent the email to bob@example.com with subject "About lunch".'),
        ("Rejected by a human reviewer: too pushy", "I did not send the email: too pushy."),
        ("Rejected by a human reviewer: ", "I did not send the email: no reason given."),
        ("Looks fine, but wait for Monday", "A reviewer responded: Looks fine, but wait for Monday"),
    ],
)
def test_outreach_reports_the_outcome(content: Any, answer: str) -> None:
    history = [user("Email bob@example.com about lunch")]
    call = step(history, EMAIL_TOOLS)["tool_calls"][0]
    history.append(tool_result(call, content))
    assert step(history, EMAIL_TOOLS) == {"role": "assistant", "content": answer, "tool_calls": None}


# --- rules: anything else ----------------------------------------------------------------------


def test_other_agents_get_an_echo() -> None:
    message = rules.reply([SYSTEM, user("x" * 300)], [])
    assert message["content"] == "(offline model) I received: " + "x" * 200
    assert message["tool_calls"] is None


def test_call_ids_are_deterministic_and_depend_on_the_conversation() -> None:
    first = rules.reply([user("Refund ORD-1001")], REFUND_TOOLS)
    assert rules.reply([user("Refund ORD-1001")], REFUND_TOOLS) == first
    other = rules.reply([user("Refund ORD-1001 ")], REFUND_TOOLS)
    assert other["tool_calls"][0]["id"] != first["tool_calls"][0]["id"]


@pytest.mark.parametrize(
    "messages",
    [
        [],
        [{}],
        [{"role": "user"}],
        [{"role": "user", "content": None}],
        [{"role": "user", "content": [{"type": "text", "text": "Refund ORD-7"}]}],
        [{"role": "user", "content": [{"type": "text", "text": 5}, {"text": None}, {"text": ["x"]}]}],
        [user("ORD-1"), {"role": "assistant", "tool_calls": 5}],
        [user("ORD-1"), {"role": "assistant", "tool_calls": {"id": "c1"}}],
        [user("ORD-1"), {"role": "assistant", "tool_calls": [{"id": "c1"}, "junk", {"function": {}}]}],
        [
            user("ORD-1"),
            {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "lookup_order"}}]},
        ],
        [
            user("ORD-1"),
            {
                "role": "assistant",
                "tool_calls": [{"id": "c1", "function": {"name": "issue_refund", "arguments": "{"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": None},
        ],
        [
            user("ORD-1"),
            {
                "role": "assistant",
                "tool_calls": [{"id": "c1", "function": {"name": "lookup_order", "arguments": "[]"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": '{"status": "ok", "total_cents": "many"}'},
        ],
    ],
)
@pytest.mark.parametrize("tools", [REFUND_TOOLS, EMAIL_TOOLS, [], [{"function": None}, "junk"]])
def test_odd_input_gets_a_sensible_answer(messages: list[Any], tools: list[Any]) -> None:
    message = rules.reply(messages, tools)
    assert message["role"] == "assistant"
    assert message["content"] or message["tool_calls"]


# --- the endpoint -------------------------------------------------------------------------------


def request(method: str, *, content: bytes = b"", headers: dict[str, str] | None = None) -> httpx.Response:
    """Send a request through the ASGI application the web server serves (routing included)."""
    from config.asgi import application

    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            return await client.request(method, URL, content=content, headers=headers)

    return async_to_sync(send)()


def post(body: Any, **headers: str) -> httpx.Response:
    data = body if isinstance(body, str) else json.dumps(body)
    return request("POST", content=data.encode(), headers={"Content-Type": "application/json", **headers})


def test_endpoint_answers_with_a_chat_completion() -> None:
    messages = [SYSTEM, user("Refund ORD-1001")]
    body = {"model": "my-model", "messages": messages, "tools": REFUND_TOOLS}
    response = post(body, Authorization="Bearer any-key")
    assert response.status_code == 200
    data = response.json()
    assert data["id"].startswith("chatcmpl-offline-")
    assert (data["object"], data["model"], data["system_fingerprint"]) == (
        "chat.completion",
        "my-model",
        "gatehouse-offline",
    )
    assert isinstance(data["created"], int)
    [choice] = data["choices"]
    assert choice["index"] == 0
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"] == rules.reply(messages, REFUND_TOOLS)
    usage = data["usage"]
    assert usage["prompt_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_endpoint_stops_on_a_text_answer_and_ignores_unknown_keys() -> None:
    body = {"model": "m", "messages": [{"id": "msg_1", "role": "user", "content": "hi", "edited_by": 3}]}
    data = (post(body)).json()
    assert data["choices"][0]["finish_reason"] == "stop"
    assert data["choices"][0]["message"]["content"] == "(offline model) I received: hi"


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("{not json", "not valid JSON"),
        ("", "not valid JSON"),
        ([], "JSON object"),
        ({"model": "m"}, "'messages'"),
        ({"messages": "hi"}, "'messages'"),
        ({"messages": ["hi"]}, "'messages'"),
        ({"messages": [], "tools": {}}, "'tools'"),
        ({"messages": [], "stream": True}, "streaming"),
        ('{"messages": [{"role": "user", "content": "a\\u0000b"}]}', "NUL"),
        ('{"messages": [{"role": "user", "content": "\\ud800"}]}', "lone surrogate"),
        ('{"messages": ' + "[" * 5000 + "]" * 5000 + "}", "nests deeper than 100"),  # a RecursionError
    ],
)
def test_endpoint_rejects_bad_requests(body: Any, fragment: str) -> None:
    response = post(body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert fragment in error["message"]


def assistant_calls(tool_calls: Any) -> dict[str, Any]:
    return {"messages": [user("Refund ORD-1001"), {"role": "assistant", "tool_calls": tool_calls}]}


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (
            {"messages": [user([{"type": "text", "text": 5}])]},
            "'messages[0].content[0].text' must be a string",
        ),
        ({"messages": [user([{"type": "text"}])]}, "'messages[0].content[0].text' must be a string"),
        ({"messages": [user([{"text": ["a"]}])]}, "'messages[0].content[0].text' must be a string"),
        ({"messages": [user(["hi"])]}, "'messages[0].content[0]' must be a content part object"),
        ({"messages": [user(5)]}, "'messages[0].content' must be a string, null or a list"),
        ({"messages": [user({"text": "hi"})]}, "'messages[0].content' must be a string, null or a list"),
        (assistant_calls(5), "'messages[1].tool_calls' must be a list"),
        (assistant_calls({"id": "c1"}), "'messages[1].tool_calls' must be a list"),
        (assistant_calls(["junk"]), "'messages[1].tool_calls[0]' must be an object with a 'function'"),
        (assistant_calls([{"id": "c1"}]), "'messages[1].tool_calls[0]' must be an object with a 'function'"),
        (
            assistant_calls([{"id": "c1", "function": {"arguments": "{}"}}]),
            "'messages[1].tool_calls[0].function.name' must be a string",
        ),
        (
            assistant_calls([{"id": "c1", "function": {"name": "lookup_order", "arguments": {}}}]),
            "'messages[1].tool_calls[0].function.arguments' must be a string",
        ),
        (
            {"messages": [user("ORD-1"), {"role": "tool", "tool_call_id": "c1", "content": {"ok": 1}}]},
            "'messages[1].content' must be a string, null or a list",
        ),
        (
            {"messages": [user("ORD-1"), {"role": "tool", "tool_call_id": "c1", "content": None}]},
            "'messages[1].content' is required for a tool message",
        ),
    ],
)
@pytest.mark.parametrize("tools", [REFUND_TOOLS, []])
def test_endpoint_rejects_malformed_messages_with_a_400_naming_where(
    body: dict[str, Any], fragment: str, tools: list[dict[str, Any]]
) -> None:
    # These reached the rules and ended as a plain-text 500 ("Exception in ASGI application").
    response = post({**body, "tools": tools})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert fragment in error["message"]


def test_endpoint_answers_well_shaped_parts_and_tool_calls() -> None:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "lookup_order", "arguments": '{"order_id": "ORD-1001"}'},
    }
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Refund ORD-1001"}, {"type": "image_url", "image_url": {}}],
        },
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": json.dumps(ORDER_1001)}]},
    ]
    response = post({"messages": messages, "tools": REFUND_TOOLS})
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"] == rules.reply(messages, REFUND_TOOLS)


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
def test_endpoint_refuses_a_body_past_max_request_bytes() -> None:
    response = post({"messages": [user("x" * 1000)]})
    assert response.status_code == 413
    assert "MAX_REQUEST_BYTES" in response.json()["error"]["message"]


def test_endpoint_only_accepts_post() -> None:
    response = request("GET")
    assert response.status_code == 405
    assert response.json()["error"]["type"] == "invalid_request_error"


@override_settings(OFFLINE_MODEL_DELAY_MS=300)
def test_endpoint_honours_the_delay() -> None:
    started = time.monotonic()
    response = post({"messages": [user("hi")]})
    assert response.status_code == 200
    assert time.monotonic() - started >= 0.3


def test_an_anonymous_caller_cannot_choose_a_delay_only_a_signed_worker_can() -> None:
    from agents.offline.server import DELAY_HEADER, signed_delay

    def took(header: str) -> float:
        started = time.monotonic()
        response = post({"messages": [user("hi")]}, **{DELAY_HEADER: header})
        assert response.status_code == 200
        return time.monotonic() - started

    # Asking for two minutes and getting an answer within ten seconds cannot pass by
    # timing luck, and leaves room for a slow shared machine.
    assert took("120000") < 10  # unsigned: the server's own delay (0) applies
    assert took(signed_delay(120_000) + "x") < 10  # a forged signature likewise
    assert took(signed_delay(300)) >= 0.3


# --- the real SDK over real HTTP --------------------------------------------------------------

DELAY_MS = 1000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def answering(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=1):
            return True
    except urllib.error.HTTPError:
        return True  # up, even if unhealthy (this test needs no database or Redis)
    except OSError:
        return False


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    """Serve the app as `serve` does (uvicorn) on a free port, with a slow offline model."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "OFFLINE_MODEL_DELAY_MS": str(DELAY_MS)}
    process = subprocess.Popen(
        web_command(port), cwd=settings.BASE_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 30
        while not answering(url):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                output = process.communicate()[0].decode(errors="replace")[-3000:]
                pytest.fail(f"the web server did not start (exit {process.returncode}):\n{output}")
            time.sleep(0.1)
        yield url
    finally:
        process.kill()
        process.wait(timeout=10)


def test_the_openai_sdk_parses_tool_calls_over_http(server_url: str) -> None:
    client = openai.OpenAI(base_url=f"{server_url}/offline/v1", api_key="offline", max_retries=0, timeout=30)
    messages: list[Any] = [SYSTEM, user("Please refund ORD-1001 and ORD-1002")]
    tools: list[Any] = REFUND_TOOLS  # the SDK wants its TypedDicts; plain dicts are what the app sends
    response = client.chat.completions.create(model="gatehouse-offline", messages=messages, tools=tools)
    assert response.model == "gatehouse-offline"
    assert response.choices[0].finish_reason == "tool_calls"
    message = response.choices[0].message
    assert message.content is None
    calls = message.tool_calls or []
    assert [(c.type, c.function.name, json.loads(c.function.arguments)) for c in calls] == [  # type: ignore[union-attr]
        ("function", "lookup_order", {"order_id": "ORD-1001"}),
        ("function", "lookup_order", {"order_id": "ORD-1002"}),
    ]
    assert [c.id for c in calls] == [c["id"] for c in rules.reply(messages, REFUND_TOOLS)["tool_calls"]]


def test_a_slow_answer_does_not_hold_up_other_requests(server_url: str) -> None:
    def ask(_: int) -> int:
        request = urllib.request.Request(
            f"{server_url}/offline/v1/chat/completions",
            data=json.dumps({"model": "m", "messages": [user("hi")]}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=4) as pool:
        assert list(pool.map(ask, range(4))) == [200] * 4
    # Served one after another these would take 4 x DELAY_MS.
    assert time.monotonic() - started < 2.5 * DELAY_MS / 1000


@pytest.mark.parametrize(
    "text", ["Please refund ORD-1001 and ORD-1002", "hello"], ids=["tool calls", "text answer"]
)
def test_the_runtime_reads_the_same_reply_the_sdk_parses(server_url: str, text: str) -> None:
    # llm.complete reads the reply's JSON itself (cast_to=object); it must see what the SDK's
    # typed ChatCompletion sees.
    messages: list[Any] = [SYSTEM, user(text)]
    with override_settings(OPENAI_BASE_URL=f"{server_url}/offline/v1", OFFLINE_MODEL_DELAY_MS=0):
        reply = llm.complete(messages=messages, tools=REFUND_TOOLS)
    client = openai.OpenAI(base_url=f"{server_url}/offline/v1", api_key="offline", max_retries=0, timeout=30)
    tools: list[Any] = REFUND_TOOLS
    typed = client.chat.completions.create(model=settings.OPENAI_MODEL, messages=messages, tools=tools)
    message = typed.choices[0].message
    assert reply.model == typed.model
    assert reply.content == message.content
    assert reply.tool_calls == [
        llm.ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments)  # type: ignore[union-attr]
        for c in message.tool_calls or []
    ]
    assert bool(reply.tool_calls) == (text != "hello")
