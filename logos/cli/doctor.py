"""`logos doctor`: is everything a run needs in place? Each check says ok, or FAIL and the fix."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import anyio
from rich.console import Console
from rich.text import Text

from logos.cli.errors import EXIT_OK, EXIT_STOPPED, CliError
from logos.cli.model import OpenModel, open_model
from logos.cli.render import format_seconds, human_status
from logos.errors import ProviderError, SettingsError
from logos.models.hf_hub import Hub
from logos.options import ExecOptions
from logos.options.declarations import SANDBOX
from logos.options.option import Values
from logos.providers import RetryPolicy
from logos.providers.base import Finish, Message, ModelRequest
from logos.providers.choice import ProviderChoice
from logos.providers.registry import PROVIDER_KINDS
from logos.settings import model_choice, resolution
from logos.settings.config_file import ConfigFile, default_config_path, load_config_file
from logos.settings.model_choice import GgufSpec, HubModelSpec, LocalModel
from logos.settings.resolution import Flags, config_path
from logos.settings.runners import RunnerSpec, make_runner, sandbox_problem, sandbox_where

Outcome = Literal["ok", "FAIL", "skip"]


@dataclass(frozen=True)
class Check:
    name: str
    outcome: Outcome
    detail: str


def describe_model_choice(
    local: LocalModel | None, choice: ProviderChoice | None, environ: Mapping[str, str]
) -> str:
    """Which model a run would use, and why: flags first, then the config file, then the
    environment (an API key, a base URL), then the default local model."""
    if isinstance(local, GgufSpec):
        return f"{local.path} with llama.cpp in this process (--gguf)"
    if isinstance(local, HubModelSpec):
        hub = Hub.from_environment(environ)
        cached = hub.cached(local.file)
        where = (
            f"cached at {cached}"
            if cached is not None
            else f"not downloaded yet: a run fetches it from {hub.endpoint} into {hub.cache_dir}"
            " (asking first on a terminal), or logos models pull does"
        )
        if not local.default:
            return f"{local.file} (--model or the config file), {where}"
        keys = ", ".join(kind.api_key_env for kind in PROVIDER_KINDS.values())
        return (
            f"the default local model {local.file}, {where}; because none of {keys}, "
            "--base-url, --gguf or --model is set (any of them chooses another model); "
            f"this one because {local.why} (logos models lists the choices)"
        )
    assert choice is not None
    if choice.uses_default_server:
        why = f"{choice.api_key_env} is set"
    else:
        why = "its base URL is set" + (
            ": llama.cpp's server, so the small-model defaults apply" if choice.llama_cpp else ""
        )
    return f"{choice.kind.label} {choice.model} at {choice.base_url} ({why})"


async def check_provider(model: OpenModel) -> Check:
    """One real request for one token: proves the address, the key and the model name."""
    where = model.gguf or model.base_url
    request = ModelRequest(
        system="Answer with one word.",
        messages=[Message(role="user", content="Say ok.")],
        max_tokens=1,
    )
    started = time.monotonic()
    finished = False
    stream = model.provider.stream(request)
    try:
        async for event in stream:
            finished = finished or isinstance(event, Finish)
    except ProviderError as exc:
        return Check("provider", "FAIL", exc.message)
    finally:
        await stream.aclose()
        await model.provider.aclose()
    if not finished:
        return Check(
            "provider", "FAIL", f"{where} ended its answer early: check that it is up to date"
        )
    elapsed = format_seconds(time.monotonic() - started)
    return Check(
        "provider", "ok", f"{model.provider.name} {model.model} at {where} answered in {elapsed}"
    )


async def check_runner(spec: RunnerSpec, options: ExecOptions) -> Check:
    """Runs `true` where the model's commands would run."""
    runner = make_runner(spec)
    try:
        result = await runner.run("true", options)
    finally:
        await runner.aclose()
    where = f"in the {spec.sandbox} sandbox" if spec.sandbox else "with local bash"
    if result.ok:
        return Check("runner", "ok", f"ran `true` {where} in {format_seconds(result.duration_s)}")
    if spec.sandbox == "sandboxd":
        fix = "check the daemon's log (`sandboxd doctor` checks the engine and the image)"
    elif spec.sandbox:
        fix = f"check the {spec.sandbox} daemon's log"
    else:
        fix = "check that bash is installed and on PATH"
    return Check("runner", "FAIL", f"`true` failed {where}: {human_status(result)}: {fix}")


def print_checks(checks: list[Check], console: Console) -> None:
    styles = {"ok": "green", "FAIL": "bold red", "skip": "yellow"}
    for check in checks:
        console.print(
            Text.assemble(
                (f"{check.outcome:<5} ", styles[check.outcome]),
                (f"{check.name:<9} ", "bold"),
                check.detail,
            )
        )


def doctor(flags: Flags, console: Console) -> int:
    """Every check, printed; exit 0 when none failed, else 1."""
    checks: list[Check] = []
    try:
        config = load_config_file(config_path(flags), os.environ)
    except SettingsError as exc:
        print_checks([Check("config", "FAIL", exc.message)], console)
        return EXIT_STOPPED
    read = config_path(flags) or default_config_path(os.environ)
    checks.append(
        Check("config", "ok", str(read) if read.exists() else f"none at {read} (defaults)")
    )
    checks.extend(_doctor_model(flags, config))
    try:
        sandbox = resolution.sandbox_choice(flags[SANDBOX], config[SANDBOX])
        spec = resolution.runner_spec(flags, config, sandbox)
        problem = sandbox_problem(spec) if sandbox else None
    except SettingsError as exc:
        sandbox, problem = "sandbox", exc.message
    if sandbox:
        checks.append(
            Check(sandbox, "FAIL", problem)
            if problem
            else Check(sandbox, "ok", f"healthy at {sandbox_where(spec)}")
        )
    if problem is None:
        options = resolution.exec_options(flags, config, os.getcwd())
        checks.append(anyio.run(check_runner, spec, options))
    else:
        checks.append(Check("runner", "skip", f"needs {sandbox} (see above)"))
    print_checks(checks, console)
    return EXIT_OK if all(check.outcome != "FAIL" for check in checks) else EXIT_STOPPED


def _doctor_model(flags: Values, config: ConfigFile) -> list[Check]:
    """Which model a run would use and why, then one real request to it; a Hub model that
    is not downloaded yet is not downloaded here."""
    try:
        chosen = model_choice.choose_model(flags, config, os.environ, None)
        local, choice = chosen.local, chosen.provider
    except SettingsError as exc:
        return [Check("model", "FAIL", exc.message)]
    model = Check("model", "ok", describe_model_choice(local, choice, os.environ))
    gguf = None
    if isinstance(local, HubModelSpec):
        cached = Hub.from_environment(os.environ).cached(local.file)
        if cached is None:
            return [model, Check("provider", "skip", f"{local.file} is not downloaded yet")]
        gguf = local.at(cached)
    elif local is not None:
        gguf = local
    try:
        with open_model(choice, gguf, retry=RetryPolicy(max_attempts=1)) as opened:
            return [model, anyio.run(check_provider, opened)]
    except (CliError, SettingsError) as exc:
        return [model, Check("provider", "FAIL", exc.message)]
