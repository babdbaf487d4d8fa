"""Where projects are saved, under the server's state directory:

    <root>/<project id>/project.json                 the project (`wire.ProjectRecord`), 0600
    <root>/<project id>/events.jsonl                 its event log: the chat and all else
    <root>/<project id>/agents/<name>/session.jsonl  each agent's own conversation

`project.json` is replaced whole (never half written) on each change; the event log is only
appended to. Ids are random hex, names match `wire.NAME_PATTERN`: no request names a path.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from logos.jsonl import make_private_dir, replace_private_file
from logos.serve.projects.wire import ProjectRecord
from logos.serve.sessions import is_id

_PROJECT_FILE = "project.json"
_EVENTS_FILE = "events.jsonl"


class ProjectStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        make_private_dir(root)

    def directory(self, project_id: str) -> Path:
        return self.root / project_id

    def events_path(self, project_id: str) -> Path:
        return self.root / project_id / _EVENTS_FILE

    def session_path(self, project_id: str, agent: str) -> Path:
        return self.root / project_id / "agents" / agent / "session.jsonl"

    def save(self, record: ProjectRecord) -> None:
        replace_private_file(
            self.root / record.id / _PROJECT_FILE, record.model_dump_json(indent=1) + "\n"
        )

    def load_all(self) -> Iterator[ProjectRecord | tuple[Path, str]]:
        """Every saved project; a damaged one as (its file, what is wrong)."""
        for directory in sorted(self.root.iterdir()):
            path = directory / _PROJECT_FILE
            if not (is_id(directory.name) and path.is_file()):
                continue
            try:
                yield ProjectRecord.model_validate_json(path.read_bytes())
            except (OSError, ValidationError) as exc:
                yield path, str(exc).splitlines()[0]

    def delete(self, project_id: str) -> None:
        if is_id(project_id):
            shutil.rmtree(self.root / project_id, ignore_errors=True)
