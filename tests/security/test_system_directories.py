"""Attack: ask for a system directory, read-only or read-write, through the real daemon.

A read-write /usr/lib lets a command running as root change what every host program loads;
a read-only /etc still shows the host's secrets; /home as a whole holds every user's
credentials. Each is refused with a 403 that says how to allow it deliberately, and the
config's exception mounts exactly what it names.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.support.sandboxd_harness import Daemon, run_with_paths, running_daemon

pytestmark = pytest.mark.docker

ASKED = ["/usr", "/usr/lib", "/lib", "/bin", "/opt", "/srv", "/home", "/var/log", "/etc/ssl"]


@pytest.mark.parametrize("read_only", [True, False])
def test_system_directories_are_refused_with_how_to_allow_them(
    daemon: Daemon, read_only: bool
) -> None:
    for path in [p for p in ASKED if os.path.exists(p)]:
        response = run_with_paths(daemon, "true", [(path, read_only)])
        assert response.status_code == 403, (path, response.text)
        error = response.json()["error"]
        assert error["code"] == "path_refused"
        assert error["message"].startswith(f"refused {path}")
        assert f"list {os.path.realpath(path)} in allowed_system_paths" in error["message"]


def test_the_config_exception_mounts_what_it_names_and_no_more(docker_client: Any) -> None:
    with running_daemon(docker_client, 'allowed_system_paths = ["/usr/share"]\n') as daemon:
        allowed = run_with_paths(daemon, "ls /usr/share", [("/usr/share", True)])
        assert allowed.status_code == 200, allowed.text
        assert sorted(allowed.json()["stdout"].split()) == sorted(os.listdir("/usr/share"))
        wider = run_with_paths(daemon, "true", [("/usr", True)])
        assert wider.status_code == 403 and "system directory /usr" in wider.text
