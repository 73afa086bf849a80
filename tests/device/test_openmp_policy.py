"""The host layer makes its OpenMP threads sleep between launches (OMP_WAIT_POLICY=PASSIVE, read by libgomp
when the first kernel library loads it) unless the user chose a policy: libgomp's default spinning burnt
more CPU than the work on 16 threads and slowed it (mapper/device/host.py)."""
import os
import subprocess
import sys

import pytest

RUN = "import os, mapper.device.host; print(os.environ.get('OMP_WAIT_POLICY'))"


@pytest.mark.parametrize("user,want", [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_wait_policy_default_and_user_choice(user, want):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if user:
        env["OMP_WAIT_POLICY"] = user
    done = subprocess.run([sys.executable, "-c", RUN], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [want]
