"""One small-suite try with mini-swe-agent in a process of its own (`python -m bench.mini_small`).

Built as its `mini` command builds it from a config (`mini.yaml`, its default: tool
calls; or `mini_textbased.yaml` with its text-based model class, `litellm_textbased`), with
the agent class that runs actions without asking (what `mini --yolo` does) and its local
environment in the task's directory, on litellm pointed at the same llama.cpp server logos
uses. Prints one JSON line: the answer (the submitted output and the last message the model
wrote), the commands that really ran (not the bare submit command), the model calls, the
tokens and how it ended.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Any

SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
TEXT_BASED = {"mini_textbased.yaml": "litellm_textbased"}
"""The model class a config needs (its commands in fenced blocks, not tool calls)."""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--api-key", required=True)
    parser.add_argument("--config", default="mini.yaml")
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--step-limit", type=int, default=30)
    parser.add_argument("--time-limit", type=int, default=180)
    parser.add_argument("task")
    args = parser.parse_args()
    # WHY before the import: importing minisweagent creates its global config directory and
    # prints a banner; cost tracking has no prices for a local model.
    os.environ["MSWEA_GLOBAL_CONFIG_DIR"] = tempfile.mkdtemp(prefix="bench-mswea-")
    os.environ["MSWEA_SILENT_STARTUP"] = "1"
    os.environ["MSWEA_COST_TRACKING"] = "ignore_errors"
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.config import builtin_config_dir, get_config_from_spec
    from minisweagent.environments.local import LocalEnvironment
    from minisweagent.models import get_model

    config = get_config_from_spec(str(builtin_config_dir / args.config))
    agent_config = {
        key: value
        for key, value in config.get("agent", {}).items()
        if key not in ("mode", "confirm_exit", "whitelist_actions")
    }
    agent_config |= {"step_limit": args.step_limit, "wall_time_limit_seconds": args.time_limit}
    model_config = {
        **config.get("model", {}),
        "model_class": TEXT_BASED.get(args.config, ""),
        "model_name": "openai/local",
        "model_kwargs": {"api_base": args.base_url, "api_key": args.api_key},
    }
    model = get_model(config=model_config)
    environment = LocalEnvironment(**{**config.get("environment", {}), "cwd": args.workspace})
    agent = DefaultAgent(model, environment, **agent_config)
    try:
        ending = agent.run(args.task)
    except Exception as exc:  # its own failure is an outcome of the try
        ending = {"exit_status": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(_summary(agent.messages, ending)))
    return 0


def _summary(messages: list[dict[str, Any]], ending: dict[str, Any]) -> dict[str, Any]:
    said = [str(m.get("content") or "") for m in messages if m.get("role") == "assistant"]
    # A reply it could not parse is kept only as the format error's `response`.
    calls = sum(1 for m in messages if m.get("extra", {}).get("response"))
    commands = [
        str(action.get("command", ""))
        for m in messages
        if m.get("role") == "assistant"
        for action in m.get("extra", {}).get("actions", [])
    ]
    tokens = 0
    for m in messages:
        usage = (m.get("extra", {}).get("response") or {}).get("usage") or {}
        tokens += int(usage.get("total_tokens") or 0)
    return {
        "exit_status": str(ending.get("exit_status", "")),
        "answer": "\n".join(part for part in (str(ending.get("submission") or ""), *said[-1:])),
        "commands": sum(1 for c in commands if c.replace(SUBMIT, "").replace("echo", "").strip()),
        "calls": calls,
        "tokens": tokens,
    }


if __name__ == "__main__":
    sys.exit(main())
