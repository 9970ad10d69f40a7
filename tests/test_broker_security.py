"""The service against brokers that want a password or TLS (real mosquitto, real openssl)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.daemon_helpers import Daemon, say
from tests.mqtt_helpers import Broker


@pytest.fixture
def password_broker(tmp_path):
    passwords = tmp_path / "passwd"
    subprocess.run(
        ["mosquitto_passwd", "-b", "-c", str(passwords), "speaker", "s3cret"], check=True
    )
    broker = Broker.start(tmp_path, extra=f"allow_anonymous false\npassword_file {passwords}")
    yield broker
    broker.stop()


def password_file(directory: Path, password: str) -> Path:
    path = directory / "mqtt.pass"
    path.write_text(password + "\n")
    path.chmod(0o600)
    return path


def with_password(client) -> None:
    client.username_pw_set("speaker", "s3cret")


def test_password_from_file_connects(password_broker, capture, tmp_path):
    mqtt = {"username": "speaker", "password_file": str(password_file(tmp_path, "s3cret"))}
    daemon = Daemon(
        password_broker, tmp_path, capture.env(), {"configure": with_password}, mqtt=mqtt
    )
    try:
        job = say(daemon, text="Authenticated.")
        daemon.recorder.event(job, "finished")
        daemon.recorder.wait_for(lambda topic, _: topic == f"{daemon.base}/stats")
        assert "s3cret" not in (tmp_path / "serve.log").read_text()
        daemon.recorder.wait_for(lambda topic, _: topic == f"{daemon.base}/status/info")
        assert not [topic for topic, payload, _ in daemon.recorder.seen if b"s3cret" in payload]
    finally:
        daemon.stop()


def test_wrong_password_is_reported_and_the_service_stays_up(password_broker, capture, tmp_path):
    mqtt = {"username": "speaker", "password_file": str(password_file(tmp_path, "wrong"))}
    daemon = Daemon(
        password_broker,
        tmp_path,
        capture.env(),
        {"configure": with_password},
        wait_online=False,
        mqtt=mqtt,
    )
    try:
        assert daemon.log_says("refused the connection: Not authorized")
        assert daemon.process.poll() is None
        assert "wrong" not in (tmp_path / "serve.log").read_text()
    finally:
        daemon.stop()


def make_ca_and_server_cert(directory: Path, name: str) -> tuple[Path, Path, Path]:
    ca_key, ca = directory / f"{name}-ca.key", directory / f"{name}-ca.pem"
    key, csr, cert = directory / f"{name}.key", directory / f"{name}.csr", directory / f"{name}.pem"
    extensions = directory / f"{name}.ext"
    extensions.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        str(ca_key),
        "-out",
        str(ca),
        "-days",
        "2",
        "-subj",
        f"/CN={name} test CA",
    )
    openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        str(key),
        "-out",
        str(csr),
        "-subj",
        "/CN=localhost",
    )
    openssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-out",
        str(cert),
        "-days",
        "2",
        "-extfile",
        str(extensions),
    )
    return ca, cert, key


@pytest.fixture
def tls_broker(tmp_path):
    ca, cert, key = make_ca_and_server_cert(tmp_path, "broker")
    broker = Broker.start(
        tmp_path,
        extra=f"allow_anonymous true\ncafile {ca}\ncertfile {cert}\nkeyfile {key}\n"
        "tls_version tlsv1.2",
    )
    yield broker, ca
    broker.stop()


def test_tls_with_server_verification_connects(tls_broker, capture, tmp_path):
    broker, ca = tls_broker
    options = {"configure": lambda client: client.tls_set(ca_certs=str(ca)), "host": "localhost"}
    mqtt = {"host": "localhost", "tls": {"ca_file": str(ca)}}
    daemon = Daemon(broker, tmp_path, capture.env(), options, mqtt=mqtt)
    try:
        job = say(daemon, text="Encrypted.")
        daemon.recorder.event(job, "finished")
    finally:
        daemon.stop()


def test_tls_with_a_foreign_ca_is_refused(tls_broker, capture, tmp_path):
    broker, ca = tls_broker
    other_ca, _, _ = make_ca_and_server_cert(tmp_path, "other")
    options = {"configure": lambda client: client.tls_set(ca_certs=str(ca)), "host": "localhost"}
    mqtt = {"host": "localhost", "tls": {"ca_file": str(other_ca)}}
    daemon = Daemon(broker, tmp_path, capture.env(), options, wait_online=False, mqtt=mqtt)
    try:
        assert daemon.log_says("certificate verify failed")
        assert daemon.process.poll() is None
    finally:
        daemon.stop()


def test_logs_carry_journald_priorities_under_systemd(password_broker, capture, tmp_path):
    """With stderr connected to the journal (JOURNAL_STREAM), each line gets its priority."""
    log = tmp_path / "serve.log"
    log.touch()
    stat = log.stat()
    env = {**capture.env(), "JOURNAL_STREAM": f"{stat.st_dev}:{stat.st_ino}"}
    mqtt = {"username": "speaker", "password_file": str(password_file(tmp_path, "wrong"))}
    daemon = Daemon(
        password_broker, tmp_path, env, {"configure": with_password}, wait_online=False, mqtt=mqtt
    )
    try:
        assert daemon.log_says("<3>daemon.mqtt: broker")
    finally:
        daemon.stop()
