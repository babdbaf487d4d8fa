"""The few blocks of the README and the docs that must not run as written here, each checked
another way: the check its `<!-- docs: not run, checked by CHECK -->` marker names.

Why each cannot run: installing would change the tests' own virtualenv; the whole check
(`./scripts/test`) and the benchmark run the suite that runs this; building the image needs a
registry; `claude` is an editor's own command; an MCP server on stdio waits for its client;
the internet is not reachable from a test; `ray stop` ends every Ray process of the machine;
a usage line holds placeholders (an approval's id)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from packaging.requirements import Requirement

from logos.cli.arguments import UsageError, build_parser, with_command
from sandboxd.cli import build_parser as sandboxd_parser
from sandboxd.egress.host_rules import parse_rule
from sandboxd.server.config import DEFAULT_IMAGE
from tests.support.docs_pages import REPO, Block, blocks, pages
from tests.support.readme import shell_lines
from tests.support.sandboxd_harness import short_dir

LAUNCH_TIMEOUT_S = 60.0


def _lines(block: Block) -> list[str]:
    return shell_lines(block.text)


def first_command(block: Block) -> None:
    """The README's first command is what tests/logos/test_readme_first_command.py runs, in a
    fresh virtualenv on a terminal, against a Hub that serves the default model."""
    from tests.logos.test_readme_first_command import readme_first_command

    assert block.page == REPO / "README.md"
    assert block.text.strip() == readme_first_command()


def ci(block: Block) -> None:
    """`./scripts/test` is what CI runs (.ci/run executes it), a script bash reads whole."""
    assert _lines(block)[0].split()[0] == "./scripts/test"
    assert "exec ./scripts/test" in (REPO / ".ci" / "run").read_text()
    script = REPO / "scripts" / "test"
    assert os.access(script, os.X_OK)
    subprocess.run(["bash", "-n", str(script)], check=True)


def install(block: Block) -> None:
    """Each install names this package (with extras that exist, whose requirements are
    installed here); a fresh install is what the README's first command test makes."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    for line in _lines(block):
        for command in line.split("&&"):
            words = shlex.split(command)
            if words[:3] == ["python3", "-m", "venv"]:
                # WHY: sandboxd refuses to mount a directory holding its own installation
                # (sandboxd.server.daemon), so a virtualenv inside the clone would make the
                # README's sandbox line refuse the clone.
                assert words[3].startswith(("~/", "/")), f"a virtualenv inside the clone: {line}"
                continue
            if words[:2] != ["pip", "install"]:
                assert words[0] == ".", f"not an install: {command}"
                continue
            target = words[2]
            match = re.fullmatch(r"\.(?:\[([\w,]+)\])?", target)
            assert match is not None, f"{target} is not this package"
            for extra in (match.group(1) or "").split(",") if match.group(1) else []:
                assert extra in extras, f"no extra {extra!r} in pyproject.toml"
                for requirement in extras[extra]:
                    name = Requirement(requirement).name
                    try:
                        distribution(name)
                    except PackageNotFoundError:
                        pytest.fail(f"the {extra} extra's {name} is not installed")


def image(block: Block) -> None:
    """`sandboxd build-image` builds DEFAULT_IMAGE from the Dockerfile (here built offline by
    scripts/setup-docker from the same file): it parses, its default tag is the daemon's
    image, and the engine has that image."""
    assert _lines(block) == ["sandboxd build-image"]
    sandboxd_parser().parse_args(["build-image"])
    import docker

    client = docker.from_env()
    try:
        client.images.get(DEFAULT_IMAGE)
    finally:
        client.close()


def _launch(line: str, cwd: Path) -> list[str]:
    """The tools a stdio MCP server started by `line` (in bash, in `cwd`) lists."""
    venv = Path(sys.executable).parent
    env = {
        "PATH": os.pathsep.join([str(venv), "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": str(cwd),
    }
    launch = StdioServerParameters(command="bash", args=["-c", f"exec {line}"], env=env, cwd=cwd)

    async def listed() -> list[str]:
        with anyio.fail_after(LAUNCH_TIMEOUT_S):
            async with Client(launch) as client:
                return [tool.name for tool in (await client.list_tools()).tools]

    return anyio.run(listed)


def mcp_stdio(block: Block) -> None:
    """Each line starts an MCP server on stdio: launched by a real MCP client, it lists its
    tools."""
    for line in _lines(block):
        assert _launch(line, short_dir("mcp")), f"{line} lists no tool"


def claude_mcp_add(block: Block) -> None:
    """What `claude mcp add NAME -- COMMAND` records, Claude Code launches: the command,
    launched by a real MCP client, lists its tools; an HTTP entry names a server the same page
    starts (`--http ADDRESS`), with the token's header."""
    for line in _lines(block):
        words = shlex.split(line, posix=True)
        assert words[:3] == ["claude", "mcp", "add"], line
        if "--" in words:
            command = line.split(" -- ", 1)[1]
            assert _launch(command, short_dir("mcp")), f"{command} lists no tool"
            continue
        assert words[3:5] == ["--transport", "http"], line
        url = re.fullmatch(r"http://(127\.0\.0\.1:\d+)/mcp", words[6])
        assert url is not None, line
        page = block.page.read_text(encoding="utf-8")
        assert f"--http {url.group(1)}" in page, f"no server on {url.group(1)} on the page"
        assert words[7:] == ["--header", "Authorization: Bearer $SANDBOXD_MCP_TOKEN"], line


def mcp_http(block: Block) -> None:
    """`sandboxd mcp --http`: the command parses, listens on loopback, and takes its token
    from $SANDBOXD_MCP_TOKEN; serving it is tests/sandboxd/test_mcp_http.py's."""
    (line,) = _lines(block)
    assert line.startswith("SANDBOXD_MCP_TOKEN=$(openssl rand -hex 24) sandboxd mcp ")
    args = sandboxd_parser().parse_args(shlex.split(line.split(" sandboxd ", 1)[1]))
    assert args.http.startswith("127.0.0.1:")
    assert (REPO / "tests" / "sandboxd" / "test_mcp_http.py").is_file()


def projects_walkthrough(block: Block) -> None:
    """The usage lines are the ones tests/logos/test_readme_projects.py reads and runs (with an
    approval's id, the options given and left out)."""
    from tests.logos.test_readme_projects import project_line

    for line in _lines(block):
        action = line.split()[2]
        assert project_line(action) == line, line


def ray_stop(block: Block) -> None:
    """`ray stop` would end every Ray process of this machine, other runs' too: the docs test
    stops the cluster its page started by its processes' ids. The command exists."""
    assert _lines(block) == ["ray stop"]
    ray = Path(sys.executable).with_name("ray")
    subprocess.run([str(ray), "stop", "--help"], check=True, capture_output=True, timeout=120)


def internet(block: Block) -> None:
    """A host of the internet cannot be reached from a test: the command parses, and every
    host it allows is an entry the allowlist takes."""
    for line in _lines(block):
        words = shlex.split(line)
        try:
            args = build_parser().parse_args(with_command(words[1:]))
        except UsageError as exc:
            pytest.fail(f"{line}: {exc.message}")
        assert args.allow_host, line
        for host in args.allow_host:
            parse_rule(host)


def quick_loop(block: Block) -> None:
    """`./scripts/test --quick` runs the suite that runs this; here, that its selection (the
    script's own marker expression) holds no test of the engine, a model, the browser or Ray,
    as pytest itself counts them."""
    assert _lines(block) == ["./scripts/test --quick"]
    script = (REPO / "scripts" / "test").read_text()
    (expression,) = re.findall(r"^QUICK_TESTS='([^']+)'$", script, flags=re.MULTILINE)
    assert '-m "$QUICK_TESTS"' in script
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", expression, "--real-parts"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    counts = dict(re.findall(r"^  (\w+) +(\d+)  ", completed.stdout, flags=re.MULTILINE))
    assert {part: counts.get(part) for part in ("docker", "llama", "browser", "ray")} == {
        "docker": "0",
        "llama": "0",
        "browser": "0",
        "ray": "0",
    }, completed.stdout


def bench(block: Block) -> None:
    """The benchmark takes minutes on purpose: tests/bench/test_bench_smoke.py runs every
    family at its smallest size; here, the script and its options."""
    for line in _lines(block):
        words = shlex.split(line)
        assert words[0] == "./scripts/bench", line
        assert os.access(REPO / "scripts" / "bench", os.X_OK)
    assert (REPO / "tests" / "bench" / "test_bench_smoke.py").is_file()
    completed = subprocess.run(
        [sys.executable, "-m", "bench", "--help"], capture_output=True, text=True, cwd=REPO
    )
    assert completed.returncode == 0, completed.stderr
    assert "--quick" in completed.stdout


CHECKS: dict[str, Callable[[Block], None]] = {
    "first-command": first_command,
    "ci": ci,
    "install": install,
    "image": image,
    "mcp-stdio": mcp_stdio,
    "mcp-http": mcp_http,
    "claude-mcp-add": claude_mcp_add,
    "projects-walkthrough": projects_walkthrough,
    "ray-stop": ray_stop,
    "internet": internet,
    "bench": bench,
    "quick-loop": quick_loop,
}
NEEDS_ENGINE = frozenset({"image"})

NOT_RUN = [block for page in pages() for block in blocks(page) if block.not_run]


def _param(block: Block) -> Any:
    marks = [pytest.mark.docker] if block.not_run in NEEDS_ENGINE else []
    return pytest.param(block, marks=marks, id=f"{block.where} {block.not_run}")


@pytest.mark.parametrize("block", [_param(block) for block in NOT_RUN])
def test_a_block_that_does_not_run_is_checked_the_way_its_marker_says(block: Block) -> None:
    check = CHECKS.get(str(block.not_run))
    assert check is not None, f"{block.where}: no check named {block.not_run!r}: {sorted(CHECKS)}"
    check(block)


def test_every_check_is_used_and_the_not_run_blocks_are_few() -> None:
    used = {block.not_run for block in NOT_RUN}
    assert used == set(CHECKS), f"checks no block uses: {set(CHECKS) - used}"
    ran = [block for page in pages() for block in blocks(page) if block.runs]
    assert len(NOT_RUN) * 3 < len(ran), (len(NOT_RUN), len(ran))
