"""A real one-node SLURM cluster on 127.0.0.1 for the slow SLURM tests (Debian's slurm-wlm and
munge: munged, slurmctld and slurmd started as daemons on a temporary key, state and spool),
and a PostgreSQL server for the sweeps' shared study; each is skipped with the reason when its
packages are missing (`make system-deps`)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

SLURM_CONF = """\
ClusterName=judgetrain-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser={user}
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge.socket
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerParameters=sched_interval=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
SlurmdParameters=config_overrides
MinJobAge=900
KillWait=5
NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory=2000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(pid_file: Path) -> None:
    try:
        os.kill(int(pid_file.read_text().strip()), 15)
    except (OSError, ValueError):
        pass


@pytest.fixture(scope="session")
def slurm_cluster():
    """SLURM_CONF of a one-node cluster (2 CPUs, partition ``debug``) whose node is idle; the
    variable is set for the session, so ``sbatch``, ``scontrol`` and judgetrain find it."""
    missing = [c for c in ("munged", "slurmctld", "slurmd", "sbatch", "sinfo") if shutil.which(c) is None]
    if missing:
        pytest.skip(f"SLURM not installed ({', '.join(missing)} not found): run `make system-deps` "
                    "(Debian packages slurm-wlm munge)")
    if os.geteuid() != 0:
        pytest.skip("the one-node SLURM cluster runs slurmd, which needs root")
    root = Path(tempfile.mkdtemp(prefix="judgetrain-slurm-"))
    root.chmod(0o755)
    for sub in ("state", "spool"):
        (root / sub).mkdir()
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    subprocess.run(["munged", f"--socket={root}/munge.socket", f"--key-file={key}", f"--pid-file={root}/munged.pid",
                    f"--log-file={root}/munged.log", f"--seed-file={root}/munge.seed", "--force"],
                   check=True, capture_output=True)
    conf = root / "slurm.conf"
    conf.write_text(SLURM_CONF.format(root=root, ctld_port=free_port(), slurmd_port=free_port(), user="root"))
    saved = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)
    try:
        subprocess.run(["slurmctld", "-f", str(conf)], check=True, capture_output=True)
        subprocess.run(["slurmd", "-f", str(conf), "-N", "localhost"], check=True, capture_output=True)
        deadline = time.monotonic() + 60
        while "idle" not in subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True).stdout:
            if time.monotonic() > deadline:
                logs = "".join((root / f).read_text()[-2000:] for f in ("slurmctld.log", "slurmd.log")
                               if (root / f).is_file())
                pytest.fail(f"the SLURM node did not become idle within 60 s:\n{logs}")
            time.sleep(0.5)
        yield conf
    finally:
        subprocess.run(["scancel", "--user=root"], capture_output=True)
        for pid_file in ("slurmd.pid", "slurmctld.pid", "munged.pid"):
            _stop(root / pid_file)
        time.sleep(1)
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_url(start_postgres):
    """A PostgreSQL server on 127.0.0.1 for the session (tests/conftest.py)."""
    return start_postgres()
