"""Real servers the tests start themselves: a throwaway PostgreSQL cluster and an S3-compatible
HTTP server (moto's server mode), each on 127.0.0.1 on a free port, torn down afterwards.

PostgreSQL comes from Debian's ``postgresql`` package (``initdb`` / ``pg_ctl`` under
``/usr/lib/postgresql/<version>/bin``; ``.ci/run`` installs it when missing). ``initdb`` refuses
to run as root, so when the tests run as root the cluster directory is handed to the
``postgres`` user and the server runs as that user (``runuser``); its unix socket lives in the
cluster directory. A server that cannot start raises :class:`ServerUnavailable` with the reason:
the tests that need it fail with that reason — they never skip.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Optional

__all__ = ["ServerUnavailable", "PostgresServer", "S3Server", "free_port"]


class ServerUnavailable(RuntimeError):
    """A test server could not be started (the message says why and what to install)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    which = shutil.which("initdb")
    if which:
        return Path(which).parent
    raise ServerUnavailable("PostgreSQL is not installed (no initdb) — apt-get install -y postgresql")


class PostgresServer:
    """``with PostgresServer() as pg: pg.dsn`` — a fresh cluster, database ``flux_test``."""

    def __init__(self) -> None:
        self.bin = _pg_bin()
        # Under /tmp whatever TMPDIR says: the server (the postgres user, when the tests run as root)
        # must be able to reach the directory, and a unix socket path is limited to ~107 bytes.
        base = "/tmp" if os.path.isdir("/tmp") and os.access("/tmp", os.W_OK) else None
        self.root = Path(tempfile.mkdtemp(prefix="flux-pg-", dir=base))
        self.data = self.root / "data"
        self.port = free_port()
        self.as_user: Optional[str] = None
        self.user = pwd.getpwuid(os.getuid()).pw_name
        if os.getuid() == 0:
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                raise ServerUnavailable("running as root and there is no postgres user to run initdb as — "
                                        "apt-get install -y postgresql") from None
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
            os.chmod(self.root, 0o700)
            self.as_user, self.user = "postgres", "postgres"
        self.dsn = f"postgresql://{self.user}@127.0.0.1:{self.port}/flux_test"
        self.started = False

    def _run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        cmd = list(args)
        if self.as_user is not None:
            cmd = ["runuser", "-u", self.as_user, "--", *cmd]
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=self.root)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ServerUnavailable(f"{' '.join(args[:1])} failed: {e}") from None

    def start(self) -> "PostgresServer":
        r = self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", self.user, "-A", "trust", "-E", "UTF8",
                      "--no-sync")
        if r.returncode != 0:
            raise ServerUnavailable(f"initdb failed: {(r.stderr or r.stdout).strip()[-400:]}")
        opts = f"-p {self.port} -h 127.0.0.1 -k {self.root} -F -c fsync=off -c full_page_writes=off"
        r = self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self.root / "log"),
                      "-w", "-t", "60", "start")
        if r.returncode != 0:
            log = (self.root / "log").read_text(errors="replace")[-400:] if (self.root / "log").exists() else ""
            raise ServerUnavailable(f"pg_ctl start failed: {(r.stderr or r.stdout).strip()[-300:]} {log}")
        self.started = True
        r = self._run(str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, "flux_test")
        if r.returncode != 0:
            self.stop()
            raise ServerUnavailable(f"createdb failed: {(r.stderr or r.stdout).strip()[-300:]}")
        return self

    def stop(self) -> None:
        if self.started:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
            self.started = False
        shutil.rmtree(self.root, ignore_errors=True)

    def fresh_database(self, name: str) -> str:
        """A new empty database on the cluster; its DSN."""
        r = self._run(str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, name)
        if r.returncode != 0:
            raise ServerUnavailable(f"createdb {name} failed: {(r.stderr or r.stdout).strip()[-300:]}")
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{name}"

    def __enter__(self) -> "PostgresServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class S3Server:
    """``with S3Server() as s3: s3.endpoint_url`` — moto's threaded server on 127.0.0.1.

    The test credentials are set in the environment (the AWS SDK chain is where a store reads
    them); :meth:`make_bucket` creates a bucket through boto3."""

    ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}

    def __init__(self) -> None:
        try:
            from moto.server import ThreadedMotoServer
        except ImportError as e:
            raise ServerUnavailable(f"moto's server mode is not installed ({e}) — pip install -e '.[test]'") from None
        self.port = free_port()
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.endpoint_url = f"http://127.0.0.1:{self.port}"
        self._saved: dict[str, Optional[str]] = {}

    def start(self) -> "S3Server":
        for k, v in self.ENV.items():
            self._saved[k] = os.environ.get(k)
            os.environ[k] = v
        self.server.start()
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise ServerUnavailable(f"moto's server did not listen on {self.endpoint_url}") from None
                time.sleep(0.05)
        return self

    def make_bucket(self, name: str) -> None:
        import boto3

        boto3.client("s3", region_name="us-east-1", endpoint_url=self.endpoint_url).create_bucket(Bucket=name)

    def stop(self) -> None:
        self.server.stop()
        for k, v in self._saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def __enter__(self) -> "S3Server":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
