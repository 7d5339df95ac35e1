"""Text no column can store: NUL characters and lone UTF-16 surrogates.

PostgreSQL refuses NUL in text and JSON, and a lone surrogate (JSON's "\\ud800") cannot be
encoded as UTF-8 anywhere. The web's edge refuses such input (config.bad_text); the runtime
refuses or replaces it in what a model writes (agents.llm, agents.tools, agents.messages).
"""

import re
from typing import Any

UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def text_problem(value: str) -> str:
    """What makes the text unstorable, or "" if nothing does."""
    found = UNSTORABLE.search(value)
    if found is None:
        return ""
    return (
        "contains a NUL character"
        if found.group() == "\x00"
        else "contains a lone surrogate (invalid Unicode)"
    )


def first_problem(value: Any, where: str) -> str:
    """Walk a parsed JSON value (keys too); describe the first unstorable string, or ""."""
    if isinstance(value, str):
        problem = text_problem(value)
        return f"{where} {problem}" if problem else ""
    if isinstance(value, dict):
        for key, item in value.items():
            name = f"{where}.{key}" if where else str(key)
            if found := first_problem(key, f"the key {name!r}") or first_problem(item, name):
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if found := first_problem(item, f"{where}[{index}]"):
                return found
    return ""
