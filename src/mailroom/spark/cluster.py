"""A real Spark standalone cluster on this machine: one master and N worker processes.

Not ``local[N]`` (one JVM, threads): the master and each worker are separate
JVMs started with pyspark's own ``bin/spark-class``, and each worker launches
its own executor JVM, so tasks, shuffles and Python workers cross process
boundaries as on a real cluster. ``standalone_cluster`` yields the master URL
to pass to ``mailroom check --master`` or ``mailroom sweep --master``; on exit
every process it started is stopped.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_ALIVE = re.compile(r"Registered (?:app|worker)|Successfully registered with master")


def spark_class() -> Path:
    """pyspark's ``bin/spark-class`` launcher."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "bin" / "spark-class"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_for(log: Path, pattern: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and re.search(pattern, log.read_text(errors="replace")):
            return
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
            raise RuntimeError(f"a Spark process exited early: {' | '.join(tail)}")
        time.sleep(0.5)
    raise TimeoutError(f"no {pattern!r} in {log} after {timeout:.0f} s")


@contextmanager
def standalone_cluster(
    workers: int = 2,
    cores: int = 1,
    memory: str = "1g",
    *,
    timeout: float = 180.0,
) -> Iterator[str]:
    """Start a master and ``workers`` workers (``cores`` and ``memory`` each) on 127.0.0.1.

    Yields the master URL once every worker has registered; stops them all on exit.
    """
    launcher = spark_class()
    home = Path(tempfile.mkdtemp(prefix="mailroom-cluster-"))
    env = {
        **os.environ,
        "SPARK_HOME": str(launcher.parent.parent),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_WORKER_DIR": str(home / "work"),
        "SPARK_LOG_DIR": str(home / "logs"),
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
    }
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
        log = home / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [str(launcher), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        procs.append(proc)
        return proc, log

    try:
        master, mlog = start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(_free_port()),
        )
        _wait_for(mlog, r"Starting Spark master|I have been elected leader", master, timeout)
        for k in range(workers):
            worker, wlog = start(
                f"worker{k}",
                "org.apache.spark.deploy.worker.Worker",
                url,
                "--host",
                "127.0.0.1",
                "--cores",
                str(cores),
                "--memory",
                memory,
                "--webui-port",
                str(_free_port()),
                "--work-dir",
                str(home / f"work{k}"),
            )
            _wait_for(wlog, r"Successfully registered with master", worker, timeout)
        yield url
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(procs):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(home, ignore_errors=True)
