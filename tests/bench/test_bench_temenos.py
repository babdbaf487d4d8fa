"""The temenos bench family runs against the real engine and counts what it should."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.plan import Plan
from bench.temenos import TITLE
from tests.bench.test_bench_smoke import load_results, run_bench


@pytest.mark.docker
@pytest.mark.timeout(400)
def test_temenos_family_runs_against_the_real_engine(tmp_path: Path, docker_client: Any) -> None:
    args = ("--smoke", "--only", "temenos", "--out", str(tmp_path))
    completed = run_bench(*args, timeout=380)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    section = load_results(tmp_path)["sections"]["temenos"]
    assert section["problems"] == []
    callers = section["raw"]["callers"]
    assert callers["runs"] == callers["succeeded"] == Plan.smoke().temenos_callers
    assert 1 <= callers["most_live_containers"] <= section["raw"]["per_caller"]
    samples = section["samples_s"][TITLE]
    for label in ("POST /v1/run, warm session", "job poll, GET /jobs/{id} (temenos)"):
        assert samples[label] and all(value > 0 for value in samples[label])
