"""The benchmark's workload: a realistic agent conversation, generated deterministically.

Per turn: an assistant message (~600 B; two turns in three it calls a tool) then, for a
call, a tool result (~1 KB). Every step rewrites a ~1 KB scratch dict and a few scalars.
"""

import json
import random
from collections.abc import Iterator
from typing import Any

WORDS = [
    "order",
    "refund",
    "customer",
    "amount",
    "shipping",
    "policy",
    "account",
    "invoice",
    "status",
    "delivered",
    "pending",
    "check",
    "verify",
    "balance",
    "note",
    "please",
    "thanks",
    "request",
    "approve",
    "review",
    "carrier",
    "tracking",
    "address",
    "update",
    "warehouse",
    "return",
    "label",
    "credit",
    "card",
    "payment",
    "total",
    "item",
    "quantity",
    "price",
    "discount",
]


class Conversation:
    """Yields the state after each step of a T-turn conversation."""

    def __init__(self, *, seed: int) -> None:
        self.random = random.Random(seed)
        self.counter = 0

    def text(self, size: int) -> str:
        words: list[str] = []
        length = 0
        while length < size:
            words.append(self.random.choice(WORDS))
            length += len(words[-1]) + 1
        return " ".join(words)[:size]

    def _id(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}_{self.counter:08d}{self.random.getrandbits(32):08x}"

    def first(self) -> dict[str, Any]:
        user = {"id": self._id("msg"), "role": "user", "content": self.text(200)}
        return {"messages": [user], "scratch": self.scratch(0), "turn": 0, "tokens": 0, "status": "start"}

    def scratch(self, step: int) -> dict[str, Any]:
        """A ~1 KB working dict, rewritten at every step."""
        return {
            "step": step,
            "plan": self.text(300),
            "notes": [self.text(120) for _ in range(4)],
            "entities": {"order_id": f"ORD-{self.random.randint(1000, 9999)}", "confidence": 0.5},
        }

    def assistant(self, *, calls_tool: bool) -> dict[str, Any]:
        message: dict[str, Any] = {"id": self._id("msg"), "role": "assistant", "content": self.text(480)}
        if calls_tool:
            message["content"] = self.text(330)
            arguments = json.dumps(
                {"order_id": f"ORD-{self.random.randint(1000, 9999)}", "reason": self.text(40)}
            )
            function = {"name": "lookup_order", "arguments": arguments}
            message["tool_calls"] = [{"id": self._id("call"), "type": "function", "function": function}]
        return message

    def tool_result(self, call_id: str) -> dict[str, Any]:
        content = json.dumps({"status": "ok", "history": [self.text(200) for _ in range(4)]})
        return {"id": self._id("msg"), "role": "tool", "tool_call_id": call_id, "content": content}

    def steps(self, values: dict[str, Any], *, turns: int) -> Iterator[dict[str, Any]]:
        """The state after every step: the model's turn, then (2 turns in 3) the tool's."""
        for turn in range(1, turns + 1):
            message = self.assistant(calls_tool=turn % 3 != 0)
            values = self._step(values, message, turn=turn, status="model")
            yield values
            if "tool_calls" in message:
                values = self._step(
                    values, self.tool_result(message["tool_calls"][0]["id"]), turn=turn, status="tool"
                )
                yield values

    def _step(
        self, values: dict[str, Any], message: dict[str, Any], *, turn: int, status: str
    ) -> dict[str, Any]:
        tokens = values["tokens"] + len(message["content"]) // 4
        return {
            "messages": [*values["messages"], message],
            "scratch": self.scratch(turn),
            "turn": turn,
            "tokens": tokens,
            "status": status,
        }
