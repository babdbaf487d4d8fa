"""sandboxd's policy on a real filesystem: symlinks, `..` tricks, /proc, homes, credentials."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from logos.ceiling import pin_root
from sandboxd.policy.errors import PolicyError
from sandboxd.policy.pinned import identify
from sandboxd.policy.policy import GrantedPath, Policy
from sandboxd.server.config import config_from_mapping
from sandboxd.server.daemon import daemon_policy
from tests.support.host_mounts import tmpfs_at


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """A fake caller home with a project and credentials, a fake daemon home and socket."""
    home = tmp_path / "home" / "alice"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("secret")
    (home / ".config" / "gcloud").mkdir(parents=True)
    project = home / "project"
    (project / "src").mkdir(parents=True)
    (project / "README").write_text("hello")
    daemon_home = tmp_path / "daemonhome"
    (daemon_home / ".aws").mkdir(parents=True)
    run = tmp_path / "run"
    run.mkdir()
    daemon_socket = run / "sandboxd.sock"
    daemon_socket.touch()
    engine_dir = tmp_path / "engine"
    engine_dir.mkdir()
    engine_socket = engine_dir / "docker.sock"
    engine_socket.touch()
    yield {
        "tmp": tmp_path,
        "home": home,
        "project": project,
        "daemon_home": daemon_home,
        "socket": daemon_socket,
        "engine": engine_socket,
    }


def _policy(world: dict[str, Path], **overrides: object) -> Policy:
    settings: dict[str, object] = {
        "image": "img:1",
        "daemon_home": world["daemon_home"],
        "daemon_paths": ((world["socket"], f"the daemon's own socket {world['socket']}"),),
        "engine_sockets": (Path("/var/run/docker.sock"), world["engine"]),
    }
    settings.update(overrides)
    return Policy(**settings)  # type: ignore[arg-type]


def _refusal(policy: Policy, path: str, home: Path | None, read_only: bool = True) -> PolicyError:
    with pytest.raises(PolicyError) as caught:
        policy.grant_paths([(path, read_only)], caller_home=home)
    return caught.value


def test_project_paths_are_granted_resolved_and_in_order(world: dict[str, Path]) -> None:
    policy = _policy(world)
    link = world["tmp"] / "to-project"
    link.symlink_to(world["project"])
    granted = policy.grant_paths(
        [(str(link / "src"), False), (str(world["project"] / "README"), True)],
        caller_home=world["home"],
    )
    src, readme = str(world["project"] / "src"), str(world["project"] / "README")
    assert granted.paths == (
        GrantedPath(src, read_only=False, identity=identify(src)),
        GrantedPath(readme, read_only=True, identity=identify(readme)),
    )
    granted.close()


@pytest.mark.parametrize("raw", ["relative/path", "./x", "", "~/project"])
def test_relative_paths_are_refused_by_rule(world: dict[str, Path], raw: str) -> None:
    error = _refusal(_policy(world), raw, world["home"])
    assert (error.status, error.code) == (403, "path_refused")
    assert "only absolute paths are mountable" in error.message


def test_nul_in_a_path_is_malformed(world: dict[str, Path]) -> None:
    error = _refusal(_policy(world), f"{world['project']}\x00/etc", world["home"])
    assert (error.status, error.code) == (400, "invalid_path")
    assert "NUL" in error.message


def test_a_missing_path_is_refused_with_the_reason(world: dict[str, Path]) -> None:
    error = _refusal(_policy(world), str(world["project"] / "nope"), world["home"])
    assert error.status == 403
    assert "does not exist" in error.message


def test_dotdot_into_a_credential_directory(world: dict[str, Path]) -> None:
    error = _refusal(_policy(world), f"{world['project']}/../.ssh", world["home"])
    assert error.status == 403
    assert "credential location ~/.ssh" in error.message
    assert f"resolves to {world['home'] / '.ssh'}" in error.message


def test_symlink_into_credentials_is_refused(world: dict[str, Path]) -> None:
    link = world["project"] / "keys"
    link.symlink_to(world["home"] / ".ssh" / "id_ed25519")
    error = _refusal(_policy(world), str(link), world["home"])
    assert "inside the credential location ~/.ssh" in error.message


def test_nested_credential_directory_under_config(world: dict[str, Path]) -> None:
    error = _refusal(_policy(world), str(world["home"] / ".config" / "gcloud"), world["home"])
    assert "~/.config" in error.message


@pytest.mark.parametrize("target", ["/etc", "/etc/passwd", "/dev/null", "/sys/kernel", "/boot"])
def test_symlinks_into_system_directories_are_refused(world: dict[str, Path], target: str) -> None:
    if not os.path.exists(target):
        pytest.skip(f"{target} does not exist here")
    link = world["project"] / "sys-link"
    link.symlink_to(target)
    error = _refusal(_policy(world), str(link), world["home"])
    assert error.status == 403
    assert "system directory" in error.message


@pytest.mark.parametrize(
    "raw",
    ["/proc", "/proc/self/root", "/proc/self/root/{project}", "/tmp/../proc/self/root/{project}"],
)
def test_proc_is_refused_as_written_before_resolution(world: dict[str, Path], raw: str) -> None:
    path = raw.format(project=str(world["project"]).lstrip("/"))
    error = _refusal(_policy(world), path, world["home"])
    assert error.status == 403
    assert "/proc" in error.message


@pytest.mark.parametrize("raw", ["//etc", "///etc/passwd", "/etc/./", "/usr/../etc"])
def test_extra_slashes_and_dots_do_not_dodge_the_rules(world: dict[str, Path], raw: str) -> None:
    error = _refusal(_policy(world), raw, world["home"])
    assert "the system directory /etc" in error.message


def test_the_root_directory_is_refused(world: dict[str, Path]) -> None:
    error = _refusal(_policy(world), "/", world["home"])
    assert "root directory" in error.message


def test_the_caller_home_itself_and_its_ancestors_are_refused(world: dict[str, Path]) -> None:
    policy = _policy(world)
    home_error = _refusal(policy, str(world["home"]), world["home"])
    assert f"the home directory {world['home']}" in home_error.message
    parent_error = _refusal(policy, str(world["home"].parent), world["home"])
    assert "it contains" in parent_error.message


def test_the_daemon_users_home_and_credentials_are_refused(world: dict[str, Path]) -> None:
    policy = _policy(world)
    assert "home directory" in _refusal(policy, str(world["daemon_home"]), None).message
    assert "~/.aws" in _refusal(policy, str(world["daemon_home"] / ".aws"), None).message


def test_a_directory_containing_the_daemon_socket_is_refused(world: dict[str, Path]) -> None:
    error = _refusal(_policy(world), str(world["socket"].parent), world["home"])
    assert "it contains the daemon's own socket" in error.message


def test_engine_sockets_and_their_directories_are_refused(world: dict[str, Path]) -> None:
    policy = _policy(world)
    assert "engine socket" in _refusal(policy, str(world["engine"]), None).message
    assert "it contains the container engine socket" in (
        _refusal(policy, str(world["engine"].parent), None).message
    )
    for system in ("/run", "/var/run"):
        assert _refusal(policy, system, None).status == 403


def test_sockets_and_fifos_are_not_mountable(world: dict[str, Path]) -> None:
    fifo = world["project"] / "fifo"
    os.mkfifo(fifo)
    error = _refusal(_policy(world), str(fifo), world["home"])
    assert "only regular files and directories" in error.message
    short_dir = Path(tempfile.mkdtemp(prefix="sdp", dir="/tmp"))
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as agent:
            agent.bind(os.fspath(short_dir / "agent.sock"))
            error = _refusal(_policy(world), str(short_dir / "agent.sock"), world["home"])
        assert "only regular files and directories" in error.message
    finally:
        shutil.rmtree(short_dir)


def test_symlink_loop_is_refused(world: dict[str, Path]) -> None:
    loop = world["project"] / "loop"
    loop.symlink_to(loop)
    error = _refusal(_policy(world), str(loop), world["home"])
    assert error.status == 403


def test_allowed_roots_confine_mounts(world: dict[str, Path]) -> None:
    policy = _policy(world, allowed_roots=(world["project"],))
    assert policy.grant_paths([(str(world["project"] / "src"), True)], caller_home=None)
    outside = world["tmp"] / "elsewhere"
    outside.mkdir()
    error = _refusal(policy, str(outside), None)
    assert "outside the config's allowed_roots" in error.message


def test_extra_denies_cover_inside_and_ancestors(world: dict[str, Path]) -> None:
    secret = world["project"] / "src"
    policy = _policy(world, extra_denies=(secret,))
    assert "extra_denies" in _refusal(policy, str(secret), None).message
    assert "it contains" in _refusal(policy, str(world["project"]), None).message


def test_duplicate_mounts_merge_and_conflicts_are_malformed(world: dict[str, Path]) -> None:
    policy = _policy(world)
    same = str(world["project"])
    granted = policy.grant_paths([(same, True), (same + "/", True)], caller_home=world["home"])
    assert granted.paths == (GrantedPath(same, read_only=True, identity=identify(same)),)
    with pytest.raises(PolicyError) as caught:
        policy.grant_paths([(same, True), (same, False)], caller_home=world["home"])
    assert (caught.value.status, caught.value.code) == (400, "conflicting_mounts")


def test_workdir_must_be_an_existing_directory_inside_a_mount(world: dict[str, Path]) -> None:
    policy = _policy(world)
    mounts = policy.grant_paths([(str(world["project"]), True)], caller_home=world["home"]).paths
    assert policy.check_workdir(None, mounts) is None
    link = world["tmp"] / "src-link"
    link.symlink_to(world["project"] / "src")
    assert policy.check_workdir(str(link), mounts) == str(world["project"] / "src")
    with pytest.raises(PolicyError) as outside:
        policy.check_workdir(str(world["tmp"]), mounts)
    assert outside.value.status == 403 and "not inside any allowed path" in outside.value.message
    with pytest.raises(PolicyError) as missing:
        policy.check_workdir(str(world["project"] / "gone"), mounts)
    assert missing.value.status == 400 and "does not exist" in missing.value.message
    with pytest.raises(PolicyError) as relative:
        policy.check_workdir("src", mounts)
    assert relative.value.status == 400


def test_env_names_and_values_are_validated(world: dict[str, Path]) -> None:
    policy = _policy(world)
    for bad in ({"1ABC": "x"}, {"A-B": "x"}, {"": "x"}, {"A B": "x"}):
        with pytest.raises(PolicyError) as caught:
            policy.filter_env(bad)
        assert caught.value.status == 400
    for value in ("a\nb", "a\x00b", "a\rb"):
        with pytest.raises(PolicyError):
            policy.filter_env({"OK": value})


def test_secret_looking_env_keys_are_stripped_and_reported(world: dict[str, Path]) -> None:
    policy = _policy(world)
    secrets = [
        "GITHUB_TOKEN",
        "github_token",
        "OPENAI_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_ACCESS_KEY_ID",
        "AWS_SESSION_TOKEN",
        "DB_PASSWORD",
        "MY_SECRET_THING",
        "SMTP_PASS",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "DATABASE_URL",
    ]
    harmless = {
        "PATH": "/bin",
        "HOME": "/h",
        "TOKENIZERS_PARALLELISM": "false",
        "AWS_REGION": "eu-west-1",
        "GIT_AUTHOR_NAME": "A",
        "LD_PRELOAD": "",
    }
    passed, stripped = policy.filter_env({**dict.fromkeys(secrets, "s"), **harmless})
    assert passed == harmless
    assert stripped == sorted(secrets)


def test_allow_env_keys_lets_named_secrets_through(world: dict[str, Path]) -> None:
    policy = _policy(world, allow_env_keys=("GITHUB_TOKEN", "HF_*"))
    passed, stripped = policy.filter_env({"GITHUB_TOKEN": "a", "HF_TOKEN": "b", "NPM_TOKEN": "c"})
    assert passed == {"GITHUB_TOKEN": "a", "HF_TOKEN": "b"}
    assert stripped == ["NPM_TOKEN"]


def test_network_needs_the_config_switch(world: dict[str, Path]) -> None:
    _policy(world).check_network(False)
    with pytest.raises(PolicyError) as caught:
        _policy(world).check_network(True)
    assert caught.value.status == 403 and "allow_network" in caught.value.message
    _policy(world, allow_network=True).check_network(True)


@pytest.mark.parametrize(
    "entry", ["10.0.0.1", "127.0.0.1:8080", "[::1]", "169.254.169.254", "0.0.0.0/4", "fe80::/16"]
)
def test_naming_special_addresses_needs_the_config_switch(
    world: dict[str, Path], entry: str
) -> None:
    with pytest.raises(PolicyError) as caught:
        _policy(world).check_hosts([entry], network=False)
    assert caught.value.code == "private_host_refused"
    assert "allow_private_hosts" in caught.value.message
    assert _policy(world, allow_private_hosts=True).check_hosts([entry], network=False)


def test_hosts_are_normalised_and_checked(world: dict[str, Path]) -> None:
    policy = _policy(world)
    hosts = ["PyPI.org", "pypi.org", "*.Example.org:8443", "151.101.0.0/16"]
    assert policy.check_hosts(hosts, network=False) == (
        "pypi.org",
        "*.example.org:8443",
        "151.101.0.0/16",
    )
    assert policy.check_hosts([], network=True) == ()
    for bad, code in (("*.org", "invalid_host"), ("pypi.org", "hosts_with_network")):
        with pytest.raises(PolicyError) as caught:
            policy.check_hosts([bad], network=bad == "pypi.org")
        assert (caught.value.status, caught.value.code) == (422, code)


def test_images_come_from_the_config(world: dict[str, Path]) -> None:
    policy = _policy(world, allowed_images=("other:2",))
    assert policy.check_image(None) == "img:1"
    assert policy.check_image("other:2") == "other:2"
    with pytest.raises(PolicyError) as caught:
        policy.check_image("evil:latest")
    assert caught.value.status == 403 and "allowed_images" in caught.value.message


def test_the_daemons_policy_refuses_the_state_dir_and_audit_log(world: dict[str, Path]) -> None:
    state = world["tmp"] / "state"
    state.mkdir()
    audit = world["tmp"] / "logs" / "audit.log"
    audit.parent.mkdir()
    audit.touch()
    config = config_from_mapping(
        {"state_dir": str(state), "audit_log": str(audit)}, source="test.toml"
    )
    policy = daemon_policy(config, socket_path=world["socket"])
    assert "state directory" in _refusal(policy, str(state), None).message
    assert "audit log" in _refusal(policy, str(audit), None).message
    assert "audit log" in _refusal(policy, str(audit.parent), None).message
    assert "own socket" in _refusal(policy, str(world["socket"].parent), None).message


SYSTEM_PATHS = [
    *("/usr", "/usr/lib", "/usr/local", "/bin", "/sbin", "/lib", "/lib64", "/etc/ssl"),
    *("/opt", "/srv", "/var", "/home", "/mnt", "/media", "/root", "/boot"),
    *("/var/lib", "/var/log", "/var/cache", "/var/spool", "/var/mail", "/var/backups"),
]


@pytest.mark.parametrize("path", SYSTEM_PATHS)
@pytest.mark.parametrize("read_only", [True, False])
def test_system_directories_are_refused_read_only_and_read_write(
    world: dict[str, Path], path: str, read_only: bool
) -> None:
    if not os.path.exists(path):
        pytest.skip(f"{path} does not exist here")
    resolved = os.path.realpath(path)
    error = _refusal(_policy(world), path, None, read_only=read_only)
    assert (error.status, error.code) == (403, "path_refused")
    assert error.message.startswith(f"refused {path}")
    hint = f"; to mount it deliberately, list {resolved} in allowed_system_paths in the daemon's"
    if path in ("/var", "/var/lib"):  # they hold the engine's storage: no exception helps
        assert "it contains the container engine's storage" in error.message
        assert "allowed_system_paths" not in error.message
    else:
        assert "the system directory" in error.message
        assert error.message.endswith(f"{hint} config")


def test_a_symlinked_system_directory_is_refused_as_what_it_resolves_to(
    world: dict[str, Path],
) -> None:
    if not os.path.islink("/lib"):
        pytest.skip("/lib is not a symlink here")
    error = _refusal(_policy(world), "/lib", None)
    assert error.message.startswith(f"refused /lib (resolves to {os.path.realpath('/lib')}): ")


def test_a_project_inside_a_system_root_stays_mountable(world: dict[str, Path]) -> None:
    for root in ("/home", "/root", "/srv", "/var/tmp"):
        project = Path(tempfile.mkdtemp(prefix="sandboxd-project-", dir=root))
        try:
            with _policy(world).grant_paths([(str(project), False)], caller_home=None) as grant:
                assert [g.path for g in grant.paths] == [str(project)]
        finally:
            project.rmdir()


def test_allowed_system_paths_lift_the_system_rules_for_what_they_hold(
    world: dict[str, Path],
) -> None:
    policy = _policy(world, allowed_system_paths=(Path("/usr/share"),))
    with policy.grant_paths([("/usr/share", True)], caller_home=None) as grant:
        assert [g.path for g in grant.paths] == ["/usr/share"]
    assert "the system directory /usr" in _refusal(policy, "/usr", None).message
    assert "the system directory /usr" in _refusal(policy, "/usr/lib", None).message


def test_allowed_system_paths_never_lift_the_other_rules(world: dict[str, Path]) -> None:
    policy = _policy(world, allowed_system_paths=(Path("/"), Path("/var"), Path("/run")))
    assert "root directory" in _refusal(policy, "/", None).message
    assert "engine's storage /var/lib/docker" in _refusal(policy, "/var", None).message
    assert "engine socket" in _refusal(policy, "/run", None).message


def test_allowed_system_paths_come_from_the_config(world: dict[str, Path]) -> None:
    config = config_from_mapping({"allowed_system_paths": ["/usr/share/"]}, source="t.toml")
    assert config.allowed_system_paths == (Path("/usr/share"),)
    policy = daemon_policy(config, socket_path=world["socket"])
    with policy.grant_paths([("/usr/share", True)], caller_home=None) as grant:
        assert [g.path for g in grant.paths] == ["/usr/share"]


def test_a_path_that_resolves_to_a_name_that_is_not_utf8_is_refused(
    world: dict[str, Path],
) -> None:
    """The engine's JSON API cannot carry such a name: a clear refusal, not a failed start."""
    target = os.fsdecode(bytes(world["project"]) + b"/caf\xe9")
    os.mkdir(target)
    link = world["project"] / "cafe"
    link.symlink_to(target)
    error = _refusal(_policy(world), str(link), world["home"])
    assert (error.status, error.code) == (403, "path_refused")
    assert error.message == (
        f"refused {link} (resolves to {world['project']}/caf\\xe9): its name is not UTF-8, "
        "which the engine's API cannot carry: rename it"
    )


def test_a_ceiling_holds_every_pinned_mount_files_and_submounts_included(
    world: dict[str, Path],
) -> None:
    project = world["project"]
    (world["tmp"] / "elsewhere").mkdir()
    (project / "src" / "away").symlink_to(world["tmp"] / "elsewhere")
    policy = _policy(world)
    ceiling = (pin_root(str(project), read_only=True),)

    def grant(*paths: tuple[Path, bool]) -> None:
        requested = [(str(path), read_only) for path, read_only in paths]
        policy.grant_paths(requested, caller_home=world["home"], ceiling=ceiling).close()

    grant((project / "src", True), (project / "README", True))
    refusals = []
    for asked in (
        (project / "src", False),
        (project / "README", False),
        (project / "src" / "away", True),
    ):
        with pytest.raises(PolicyError) as refused:
            grant(asked)
        assert (refused.value.status, refused.value.code) == (403, "path_outside_ceiling")
        refusals.append(refused.value.message)
    assert "hold it only read-only" in refusals[0] and "hold it only read-only" in refusals[1]
    assert f"(resolves to {world['tmp'] / 'elsewhere'}): it is outside" in refusals[2]
    with tmpfs_at(project / "src" / "mounted"):
        # The read-only bind of a mount point beneath a read-only grant lies within it too.
        grant((project / "src", True))
