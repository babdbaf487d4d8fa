"""`logos models`: the GGUF models in the Hugging Face cache (`logos.models.hf_hub`): list, pull,
rm; the list also shows the models the default is chosen from (`logos.models.fitting`)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TextIO

from pydantic import BaseModel, TypeAdapter

from logos.cli.download_progress import download_progress
from logos.cli.errors import EXIT_INTERRUPTED, EXIT_OK, CliError
from logos.models.fitting import (
    Choice,
    Machine,
    UnknownLocalModel,
    choose_local_model,
)
from logos.models.hf_hub import Hub
from logos.models.hub_file import CachedModel, HubError, HubFile, megabytes


class ModelEntry(BaseModel):
    """One model of `logos models list --json`."""

    spec: str
    repo_id: str
    filename: str
    revision: str | None
    """None for main."""
    commit: str
    size: int
    path: str
    default: bool
    """Whether it is the model logos runs when given no other."""


_ENTRIES = TypeAdapter(list[ModelEntry])


def models_command(
    args: argparse.Namespace,
    hub: Hub,
    out: TextIO,
    err: TextIO,
    environ: Mapping[str, str],
    pinned: str | None = None,
) -> int:
    """Run one action (`list` when none is given); progress and notes go to `err`.
    `pinned`: the config file's `local_model`."""
    action = args.models_action or "list"
    machine = Machine.this_one()
    try:
        choice = choose_local_model(machine, pinned)
    except UnknownLocalModel as exc:
        raise CliError(f"{exc} (local_model in the config file)") from None
    default = choice.option.file
    try:
        if action == "list":
            _list(hub, out, default, as_json=args.json)
            if not args.json:
                _choices(choice, machine, out)
        elif action == "pull":
            _pull(hub, _file(args.spec) if args.spec else default, out, err, environ)
        else:
            file = _file(args.spec)
            freed = hub.remove(file)
            out.write(f"removed {file}: {megabytes(freed)} freed\n")
    except HubError as exc:
        raise CliError(exc.message) from None
    return EXIT_OK


def _list(hub: Hub, out: TextIO, default: HubFile, *, as_json: bool) -> None:
    models = hub.models()
    if as_json:
        entries = [_entry(model, default) for model in models]
        out.write(_ENTRIES.dump_json(entries).decode() + "\n")
        return
    for model in models:
        mark = "\tdefault" if model.file == default else ""
        out.write(f"{model.file}\t{megabytes(model.size)}\t{model.path}{mark}\n")
    if not models:
        out.write(
            f"no models in {hub.cache_dir} yet: logos models pull fetches the default one, "
            f"{default}\n"
        )


def _choices(choice: Choice, machine: Machine, out: TextIO) -> None:
    """The models the default is chosen from, each with its size and estimated speed here."""
    out.write(f"\nthe default local model, chosen for this machine ({machine.describe()}):\n")
    for fit in choice.fits:
        option = fit.option
        mark = f"\tdefault: {choice.why}" if option == choice.option else ""
        out.write(
            f"{option.name}\t{option.file}\t{megabytes(option.size_bytes)}\t"
            f"about {fit.tokens_per_s:.0f} tokens/s and a first answer in about "
            f"{fit.first_answer_s:.0f} s here{mark}\n"
        )
    out.write('local_model = "NAME" in the config file pins one\n')


def _pull(hub: Hub, file: HubFile, out: TextIO, err: TextIO, environ: Mapping[str, str]) -> None:
    """Fetch without asking (pulling is the asking), and print where the file is."""
    path = hub.cached(file)
    if path is not None:
        err.write(f"logos: {file} is in the cache already\n")
    else:
        try:
            path = hub.fetch(file, download_progress(err, environ))
        except KeyboardInterrupt:
            raise CliError(
                "interrupted: run the same command again to resume", EXIT_INTERRUPTED
            ) from None
    out.write(f"{path}\n")


def _file(spec: str) -> HubFile:
    try:
        return HubFile.parse(spec)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _entry(model: CachedModel, default: HubFile) -> ModelEntry:
    return ModelEntry(
        spec=str(model.file),
        repo_id=model.file.repo_id,
        filename=model.file.filename,
        revision=model.file.revision,
        commit=model.commit,
        size=model.size,
        path=str(model.path),
        default=model.file == default,
    )
