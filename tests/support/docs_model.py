"""The model a docs page's commands talk to: the scripted model server, answering by the rules
the page writes in its `<!-- docs-model … -->` comment.

A rule is `{"when": TEXT, "replies": [REPLY, …]}`. A conversation is answered by the rule
whose TEXT its latest user message holding any rule's TEXT holds (the task, a follow-up, a
message of a project's chat), with the reply after as many as the model gave since that
message: so several conversations can run at once (a batch, a project's agents), in any
order, each with its own script. A conversation no rule covers, or that wants more replies
than its rule has, is answered 501 with the reason, so the command that asked fails and
says why. Each request is answered in the wire format it was sent in (OpenAI's or
Anthropic's)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tests.support.sse_server import (
    RecordedRequest,
    Reply,
    anthropic_stream,
    json_error,
    openai_stream,
)


def answer_by_rules(rules: Sequence[Mapping[str, Any]]) -> Any:
    """The `answer_with` function of a scripted server that follows `rules`."""

    def answer(request: RecordedRequest) -> Reply:
        anthropic = request.path.rstrip("/").endswith("/messages")
        messages = [m for m in request.json.get("messages", []) if m["role"] != "system"]
        texts = [(m["role"], _text(m["content"])) for m in messages]
        for position in range(len(texts) - 1, -1, -1):
            role, text = texts[position]
            rule = next((r for r in rules if role == "user" and r["when"] in text), None)
            if rule is None:
                continue
            given = sum(1 for role, _ in texts[position + 1 :] if role == "assistant")
            replies = rule["replies"]
            if given >= len(replies):
                return json_error(
                    501,
                    f"the docs model has {len(replies)} replies for {rule['when']!r}, and this "
                    f"conversation asks for reply {given + 1}",
                )
            reply = str(replies[given])
            return anthropic_stream(reply) if anthropic else openai_stream(reply)
        latest = texts[-1][1][:300] if texts else ""
        return json_error(501, f"no docs-model rule covers this conversation; it ends: {latest}")

    return answer


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))
