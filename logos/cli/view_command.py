"""`logos view FILE`: a saved run (a trajectory) in the page's run viewer, or a batch's
results.jsonl as its report, served on loopback for as long as the command runs.

The token is made for this one page and kept in memory: it is printed in the URL's fragment,
which the browser never sends to the server.
"""

from __future__ import annotations

import argparse
import webbrowser
from pathlib import Path
from typing import TextIO

import anyio

from logos.access.token_file import new_token
from logos.cli.errors import EXIT_OK, CliError
from logos.errors import RecordFileError
from logos.records.trajectory import load_trajectory

_VIEW_HOST = "127.0.0.1"
INSTALL_HINT = (
    "logos view needs Starlette and uvicorn, which are not installed: pip install 'logos[serve]'"
)


def view_command(args: argparse.Namespace, err: TextIO) -> int:
    try:
        from logos.serve.server import BindError, bind_tcp, serve_page
        from logos.serve.view import build_view_app, read_batch_results, saved_run
    except ImportError as exc:
        if str(exc.name).split(".")[0] in ("starlette", "uvicorn"):
            raise CliError(INSTALL_HINT) from None
        raise
    path = Path(args.file).expanduser()
    batch = read_batch_results(path)
    run = None
    if batch is None:
        try:
            run = saved_run(load_trajectory(path))
        except RecordFileError as exc:
            raise CliError(
                f"{exc.message} (logos view opens a run's trajectory or a batch's results.jsonl)"
            ) from None
    try:
        listener = bind_tcp(_VIEW_HOST, args.port, allow_remote=False)
    except BindError as exc:
        raise CliError(str(exc)) from None
    token = new_token()
    app = build_view_app(token, listener.hosts, run, batch)
    url = f"{listener.url}/#token={token}&view={'batch' if batch is not None else 'run'}"

    def ready() -> None:
        err.write(f"logos view: open {url}\nlogos view: Ctrl-C stops it\n")
        err.flush()
        if args.open:
            webbrowser.open(url)

    anyio.run(serve_page, app, listener, ready)
    return EXIT_OK
