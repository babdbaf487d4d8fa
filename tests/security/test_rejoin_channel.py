"""Attack: take the supervisor's channel while no daemon is there.

Once its daemon is gone, a sandbox's supervisor waits for the next one, which reaches it
through FIFOs it makes in the control directory's rejoin/ under names only the sandbox's
secret gives (sandboxd.inside.supervisor). A command of that sandbox runs as the same uid as
the supervisor and sees the control directory (read-only): it must not be able to list
rejoin/, make anything in it, read the secret from the supervisor (its memory, descriptors,
environment, command line) or from any file it can reach, nor reach the old channel; and the
next daemon must still get through.
"""

from __future__ import annotations

import json
import textwrap
import time
from typing import Any

import pytest

from tests.support.restarts import restartable

pytestmark = [pytest.mark.docker, pytest.mark.timeout(240)]

ATTACK = textwrap.dedent(
    """\
    import errno, json, os, random, time

    time.sleep(2)  # the daemon is gone by then
    tried = {}

    def attempt(name, action):
        try:
            action()
            tried[name] = "succeeded"
        except OSError as exc:
            tried[name] = errno.errorcode.get(exc.errno, str(exc.errno))

    def read(path):
        with open(path, "rb") as f:
            f.read()

    attempt("list rejoin", lambda: os.listdir("/.sandboxd/rejoin"))
    attempt("make a fifo in rejoin", lambda: os.mkfifo("/.sandboxd/rejoin/in"))
    attempt("open rejoin up", lambda: os.chmod("/.sandboxd/rejoin", 0o777))
    attempt("replace rejoin", lambda: os.rename("/.sandboxd/rejoin", "/.sandboxd/x"))
    def open_descriptors():
        for number in range(64):  # whatever the listing says (it is no secret)
            try:
                os.close(os.open("/proc/1/fd/%d" % number, os.O_RDWR | os.O_NONBLOCK))
                return
            except OSError as exc:
                if exc.errno != errno.ENOENT:
                    error = exc
        raise error

    attempt("supervisor descriptors", open_descriptors)
    attempt("supervisor descriptor links", lambda: os.readlink("/proc/1/fd/0"))
    attempt("supervisor memory", lambda: read("/proc/1/mem"))
    attempt("supervisor environment", lambda: read("/proc/1/environ"))
    attempt("supervisor root", lambda: os.listdir("/proc/1/root/.sandboxd/rejoin"))
    attempt("old requests", lambda: os.open("/.sandboxd/in", os.O_WRONLY | os.O_NONBLOCK))
    attempt("old replies", lambda: os.open("/.sandboxd/out", os.O_RDONLY | os.O_NONBLOCK))
    found = 0
    for _ in range(2000):  # names a guessed secret would give
        name = "%032x.in" % random.getrandbits(128)
        try:
            os.close(os.open("/.sandboxd/rejoin/" + name, os.O_RDONLY | os.O_NONBLOCK))
            found += 1
        except OSError:
            pass
    tried["guessed names that opened"] = found
    print(json.dumps(tried, sort_keys=True))
    """
)
READABLE = (
    "cat /proc/1/cmdline /.sandboxd/sandbox.json /.sandboxd/hosts /.sandboxd/beat "
    "/proc/self/environ 2>/dev/null; env; ls -la /.sandboxd /.sandboxd/rejoin 2>&1"
)


def test_no_command_takes_the_channel_or_finds_the_secret_while_no_daemon_is_there(
    docker_client: Any,
) -> None:
    with restartable(docker_client) as daemons:
        daemons.start()
        daemons.ok(f"cat > /tmp/attack.py <<'EOF'\n{ATTACK}EOF", "victim")
        job = daemons.ok(
            "python3 /tmp/attack.py > /tmp/attack.out 2>&1; cat /tmp/attack.out",
            "victim",
            background_after_s=0.3,
        )
        daemons.kill()
        time.sleep(6)  # the attack runs while no daemon is there
        daemons.start()
        with daemons.client() as http:
            ended = http.get(f"/v1/jobs/{job['job']['id']}", params={"wait_s": 60}).json()
        assert ended["status"] == "completed", ended
        tried = json.loads(ended["result"]["stdout"].splitlines()[-1])
        assert tried == {
            "list rejoin": "EACCES",
            "make a fifo in rejoin": "EROFS",
            "open rejoin up": "EROFS",
            "replace rejoin": "EROFS",
            "supervisor descriptors": "EACCES",
            "supervisor descriptor links": "EACCES",
            "supervisor memory": "EACCES",
            "supervisor environment": "EACCES",
            "supervisor root": "EACCES",
            "old requests": "ENOENT",
            "old replies": "ENOENT",
            "guessed names that opened": 0,
        }
        # The secret is in the daemon's state directory (0600), and nowhere the sandbox sees.
        (record,) = (daemons.state_dir / "sandboxes").glob("*.json")
        assert record.stat().st_mode & 0o777 == 0o600
        secret = json.loads(record.read_text())["secret"]
        assert len(secret) == 64
        seen = daemons.ok(READABLE, "victim")
        assert secret not in seen["stdout"] + seen["stderr"]
        assert "Permission denied" in seen["stdout"], seen  # rejoin/ cannot be listed
        assert seen["sandbox"] == job["sandbox"], "the next daemon got through"
