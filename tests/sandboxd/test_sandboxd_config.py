"""sandboxd's TOML config: defaults, every key, and errors that name the key and the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandboxd.paths import default_state_dir
from sandboxd.server.config import (
    DEFAULT_IMAGE,
    ConfigError,
    DaemonConfig,
    default_config_path,
    load_config,
)
from sandboxd.sizes import parse_size


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sandboxd.toml"
    path.write_text(text)
    return path


def test_defaults_are_the_safe_ones() -> None:
    config = DaemonConfig()
    assert config.image == DEFAULT_IMAGE
    assert config.allow_network is False
    assert config.allow_private_hosts is False and config.egress_hosts == {}
    assert config.allowed_images == () and config.allow_env_keys == ()
    assert config.allowed_roots == () and config.extra_denies == ()
    assert config.default_timeout_s <= config.max_timeout_s
    assert config.audit_log_path == config.state_dir / "audit.log"
    assert config.pool.size == 0, "no warm sandbox holds a caller's paths unless asked for"


def test_every_key_is_read(tmp_path: Path) -> None:
    roots = tmp_path / "projects"
    roots.mkdir()
    path = _write(
        tmp_path,
        f"""
image = "img:2"
allowed_images = ["other:1"]
allowed_roots = ["{roots}"]
extra_denies = ["~/private"]
allow_network = true
allow_env_keys = ["GITHUB_TOKEN", "HF_*"]
default_timeout_s = 30
max_timeout_s = 600.5
shutdown_grace_s = 2
idle_ttl_s = 60
max_workers = 8
state_dir = "{tmp_path / "state"}"
audit_log = "{tmp_path / "audit.jsonl"}"
max_connections = 100
idle_timeout_s = 5
max_allowed_paths = 8
max_output_memory = "2g"
max_output_memory_wait_s = 0
audit_log_max_bytes = "1m"
audit_log_backups = 0
max_forks = 4
allow_private_hosts = true
max_allowed_hosts = 4
egress_max_connections = 8
egress_max_bytes = "2m"

[egress_hosts]
"Intranet.Corp." = ["10.0.0.5", "fd00::5"]

[limits]
memory = "512m"
cpus = 1.5
pids = 128
tmp = "1GiB"

[pool]
size = 4
memory = "2g"
remember_s = 60
""",
    )
    config = load_config(path)
    assert config.image == "img:2" and config.allowed_images == ("other:1",)
    assert config.allowed_roots == (roots,)
    assert config.extra_denies == (Path.home().resolve() / "private",)
    assert config.allow_network is True
    assert config.allow_env_keys == ("GITHUB_TOKEN", "HF_*")
    assert (config.default_timeout_s, config.max_timeout_s) == (30.0, 600.5)
    assert (config.shutdown_grace_s, config.idle_ttl_s, config.max_workers) == (2.0, 60.0, 8)
    assert config.limits.memory == 512 * 1024**2
    assert (config.limits.cpus, config.limits.pids) == (1.5, 128)
    assert config.limits.tmp == 1024**3
    assert (config.pool.size, config.pool.memory, config.pool.remember_s) == (4, 2 * 1024**3, 60)
    assert config.state_dir == tmp_path / "state"
    assert config.audit_log_path == tmp_path / "audit.jsonl"
    assert (config.max_connections, config.idle_timeout_s) == (100, 5.0)
    assert config.max_allowed_paths == 8
    assert (config.max_output_memory, config.max_output_memory_wait_s) == (2 * 1024**3, 0.0)
    assert (config.audit_log_max_bytes, config.audit_log_backups) == (1024**2, 0)
    assert config.max_forks == 4
    assert config.allow_private_hosts is True and config.max_allowed_hosts == 4
    assert (config.egress_max_connections, config.egress_max_bytes) == (8, 2 * 1024**2)
    assert config.egress_hosts == {"intranet.corp": ("10.0.0.5", "fd00::5")}


def test_unknown_keys_are_errors_naming_the_key_and_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, 'imgae = "x"\n[limits]\nmemroy = "1g"\n[pool]\nsise = 2\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert str(path) in message
    assert "unknown key 'imgae'" in message
    assert "unknown key 'limits.memroy'" in message
    assert "unknown key 'pool.sise' (known keys: memory, remember_s, size)" in message
    assert "known keys:" in message and "image" in message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('allowed_roots = ["relative/dir"]', "is not absolute"),
        ('[limits]\nmemory = "lots"', "is not a size"),
        ("[limits]\nmemory = 1024", "limits.memory"),
        ("[limits]\npids = 2", "limits.pids"),
        ("max_forks = 0", "max_forks"),
        ("[pool]\nsize = -1", "pool.size"),
        ("[pool]\nsize = 1000", "pool.size"),
        ('[pool]\nmemory = "lots"', "is not a size"),
        ("default_timeout_s = 0", "default_timeout_s"),
        ("max_timeout_s = 10\ndefault_timeout_s = 20", "larger than max_timeout_s"),
        ("allow_network = 'yes'", "allow_network"),
        ("max_workers = 0", "max_workers"),
        ('backend = "podman"', "key 'backend': Input should be 'docker'"),
        ('[egress_hosts]\n"a b" = ["10.0.0.1"]', "'a b' is not a host name"),
        ('[egress_hosts]\n"x.test" = ["localhost"]', "'localhost' is not an IP address"),
        ('[egress_hosts]\n"x.test" = []', "'x.test' has no address"),
        ("egress_max_bytes = 10", "egress_max_bytes"),
    ],
)
def test_bad_values_say_what_is_wrong(tmp_path: Path, text: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(_write(tmp_path, text))
    assert fragment in str(caught.value)
    assert str(tmp_path) in str(caught.value)


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "image = \n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert f"config file {path} is not valid TOML" in str(caught.value)


def test_a_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "nope.toml")
    assert "cannot read config file" in str(caught.value) and "--config" in str(caught.value)


def test_no_file_means_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANDBOXD_CONFIG", str(tmp_path / "absent.toml"))
    assert load_config() == DaemonConfig()
    present = _write(tmp_path, 'image = "from-env:1"')
    monkeypatch.setenv("SANDBOXD_CONFIG", str(present))
    assert default_config_path() == present
    assert load_config().image == "from-env:1"


def test_default_paths_follow_xdg() -> None:
    assert default_state_dir({"XDG_STATE_HOME": "/x/state"}) == Path("/x/state/sandboxd")
    assert default_state_dir({}) == Path.home() / ".sandboxd"
    assert default_config_path({"XDG_CONFIG_HOME": "/x/cfg"}) == Path("/x/cfg/sandboxd/config.toml")


@pytest.mark.parametrize(
    ("value", "size"),
    [
        (4096, 4096),
        ("512m", 512 * 1024**2),
        ("2g", 2 * 1024**3),
        ("2GiB", 2 * 1024**3),
        ("1.5k", 1536),
        ("100", 100),
        ("64 MB", 64 * 1024**2),
    ],
)
def test_sizes_use_binary_units_like_docker(value: object, size: int) -> None:
    assert parse_size(value) == size


@pytest.mark.parametrize("value", ["", "1x", "-5m", True, 1.5, None])
def test_bad_sizes_are_refused(value: object) -> None:
    with pytest.raises(ValueError):
        parse_size(value)
