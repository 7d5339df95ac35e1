"""The load benchmark at CI size: every thread reaches its gate and completes after its API
decision, none is lost and no side effect is duplicated. (`make bench` runs it with 1,000
threads at 2 s a model call and with 500 at none, and reports the rates; here only correctness
is checked, never a duration.)"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


def test_forty_threads_on_two_workers_all_complete_with_one_refund_each() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "manage.py", "bench_load", "--threads", "40", "--workers", "2"]
    database = f"{Path(connection.settings_dict['NAME']).stem}_load"  # beside this run's test database
    command += ["--json", "--private-redis", "--database", database, "--timeout", "240", "--probes", "2"]

    done = subprocess.run(
        command, cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, timeout=420
    )

    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert (report["all_at_gate"], report["all_done"]) == (True, True)
    assert report["decisions_via_api"] == 40
    assert (report["lost_threads"], report["failed_threads"], report["duplicated_side_effects"]) == (0, 0, 0)
    assert report["refunds"] == 40
    # Two probe gates are decided one at a time before the load and two while it starts (the
    # rest at once if the start is over first); lost_threads counts the probe threads too.
    assert report["resume_idle_ms_p50"] is not None
    # Where a step's CPU went: both processes did work for the steps, so both are above zero.
    assert report["cpu_ms_per_step"]["workers"] > 0
    assert report["cpu_ms_per_step"]["web"] > 0
    assert report["cpu_ms_per_step"]["bench"] > 0
    if report["database"] == "postgresql":  # this machine's server, its sessions' CPU read from /proc
        assert report["cpu_ms_per_step"]["postgres"] > 0
    # The machine's limit: the climb's CPU spread over every core. No stack spends more than its
    # cores' time, so the limit is never above the climb's own time (the readings' own moments aside).
    assert report["to_gate_cpu_s"] > 0
    assert 0 < report["to_gate_machine_busy"] <= 1
    assert report["to_gate_cpu_limit_s"] == round(report["to_gate_cpu_s"] / report["cores"], 2)
    assert report["to_gate_cpu_limit_s"] <= report["to_gate_s"] + 0.25
