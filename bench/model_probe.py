"""`python -m bench.model_probe GGUF`: load a GGUF model with llama.cpp in this process, as
`logos --gguf` does, and time it; prints one JSON line.

- `load_s`: from the start of the load to the server answering `/health`;
- `ttft_s`: time to the first token of a streamed reply to what logos sends a llama.cpp
  model first (the compact system prompt, its worked example and a task), each sample on a
  fresh prompt cache (`cache_prompt` off), so the whole prompt is read every time;
- `decode_tokens_per_s`: llama.cpp's own decode rate over a fixed-length reply
  (`ignore_eos`, so every sample generates the same number of tokens).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Any

import httpx

from logos.models.llama_server import LocalModelServer
from logos.protocol.prompt import build_system_prompt
from logos.protocol.worked_examples import SMALL_MODEL_EXAMPLES

TASK = "How many lines does notes.txt have?"
SAMPLES = 3
DECODE_TOKENS = 128


def main() -> int:
    gguf = sys.argv[1]
    started = time.perf_counter()
    with LocalModelServer(gguf, n_ctx=8192) as server:
        load_s = time.perf_counter() - started
        headers = {"authorization": f"Bearer {server.api_key}"}
        messages = [
            {"role": "system", "content": build_system_prompt(working_dir="/w", style="compact")},
            *({"role": m.role, "content": m.content} for m in SMALL_MODEL_EXAMPLES.turns(TASK)),
            {"role": "user", "content": TASK},
        ]
        with httpx.Client(base_url=server.openai_base_url, headers=headers, timeout=300) as client:
            ttft = [_first_token_s(client, messages) for _ in range(SAMPLES)]
            decode = [_decode_rate(client, messages) for _ in range(SAMPLES)]
            prompt_tokens = _prompt_tokens(client, messages)
    print(
        json.dumps(
            {
                "load_s": load_s,
                "ttft_s": statistics.median(ttft),
                "decode_tokens_per_s": statistics.median(decode),
                "prompt_tokens": prompt_tokens,
            }
        )
    )
    return 0


def _first_token_s(client: httpx.Client, messages: list[dict[str, str]]) -> float:
    body = {"messages": messages, "stream": True, "max_tokens": 8, "cache_prompt": False}
    started = time.perf_counter()
    with client.stream("POST", "/chat/completions", json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            delta = json.loads(line[6:])["choices"][0].get("delta", {})
            if delta.get("content"):
                return time.perf_counter() - started
    raise RuntimeError("the reply held no token")


def _decode_rate(client: httpx.Client, messages: list[dict[str, str]]) -> float:
    body: dict[str, Any] = {
        "messages": messages,
        "max_tokens": DECODE_TOKENS,
        "ignore_eos": True,
        "temperature": 0,
    }
    reply = client.post("/chat/completions", json=body).json()
    return float(reply["timings"]["predicted_per_second"])


def _prompt_tokens(client: httpx.Client, messages: list[dict[str, str]]) -> int:
    reply = client.post(
        "/chat/completions", json={"messages": messages, "max_tokens": 1, "cache_prompt": False}
    ).json()
    return int(reply["usage"]["prompt_tokens"])


if __name__ == "__main__":
    sys.exit(main())
