"""The service against brokers that want a password or TLS (real mosquitto, real openssl)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.daemon_helpers import Daemon, say
from tests.mqtt_helpers import Broker, Recorder


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


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_ca(directory: Path, name: str) -> tuple[Path, Path]:
    ca_key, ca = directory / f"{name}-ca.key", directory / f"{name}-ca.pem"
    openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key),
        "-out", str(ca), "-days", "2", "-subj", f"/CN={name} test CA",
    )  # fmt: skip
    return ca, ca_key


def issue_cert(
    directory: Path, ca: tuple[Path, Path], name: str, san: str | None
) -> tuple[Path, Path]:
    """A certificate signed by `ca`: a server's with `san`, or a client's (san None)."""
    key, csr, cert = directory / f"{name}.key", directory / f"{name}.csr", directory / f"{name}.pem"
    extensions = directory / f"{name}.ext"
    extensions.write_text(f"subjectAltName={san}\n" if san else "extendedKeyUsage=clientAuth\n")
    openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr),
        "-subj", f"/CN={name}",
    )  # fmt: skip
    openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]),
        "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(extensions),
    )  # fmt: skip
    return cert, key


def make_ca_and_server_cert(
    directory: Path, name: str, san: str = "DNS:localhost,IP:127.0.0.1"
) -> tuple[Path, Path, Path]:
    ca = make_ca(directory, name)
    cert, key = issue_cert(directory, ca, name, san)
    return ca[0], cert, key


def start_tls_broker(directory: Path, ca: Path, cert: Path, key: Path, extra: str) -> Broker:
    return Broker.start(
        directory,
        extra=f"allow_anonymous true\ncafile {ca}\ncertfile {cert}\nkeyfile {key}\n{extra}",
    )


@pytest.fixture
def tls_broker(tmp_path):
    ca, cert, key = make_ca_and_server_cert(tmp_path, "broker")
    broker = start_tls_broker(tmp_path, ca, cert, key, "tls_version tlsv1.2")
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
        assert daemon.log_says("<3>daemon.mqtt.broker: broker")
    finally:
        daemon.stop()


def test_tls_to_a_broker_whose_certificate_names_another_host_is_refused(capture, tmp_path):
    ca, cert, key = make_ca_and_server_cert(tmp_path, "broker", san="DNS:elsewhere.invalid")
    broker = start_tls_broker(tmp_path, ca, cert, key, "")

    def trusting(client) -> None:  # the recorder itself only needs to get in
        client.tls_set(ca_certs=str(ca))
        client.tls_insecure_set(True)

    mqtt = {"host": "localhost", "tls": {"ca_file": str(ca)}}
    options = {"configure": trusting, "host": "localhost"}
    daemon = Daemon(broker, tmp_path, capture.env(), options, wait_online=False, mqtt=mqtt)
    try:
        # The broker is tried after the voices load and warm: on a busy CI box that once took
        # past a minute with nothing in the log yet.
        mismatch = "Hostname mismatch, certificate is not valid for 'localhost'"
        assert daemon.log_says(mismatch, timeout=180)
        assert daemon.process.poll() is None
    finally:
        daemon.stop()
        broker.stop()


@pytest.fixture
def client_cert_broker(tmp_path):
    """A broker that only lets in clients with a certificate from its CA."""
    ca = make_ca(tmp_path, "site")
    cert, key = issue_cert(tmp_path, ca, "broker", "DNS:localhost,IP:127.0.0.1")
    broker = start_tls_broker(tmp_path, ca[0], cert, key, "require_certificate true")
    yield broker, ca
    broker.stop()


def test_client_certificate_lets_the_service_in(client_cert_broker, capture, tmp_path):
    broker, ca = client_cert_broker
    cert, key = issue_cert(tmp_path, ca, "speaker", None)

    def with_cert(client) -> None:
        client.tls_set(ca_certs=str(ca[0]), certfile=str(cert), keyfile=str(key))

    mqtt = {
        "host": "localhost",
        "tls": {"ca_file": str(ca[0]), "cert_file": str(cert), "key_file": str(key)},
    }
    daemon = Daemon(broker, tmp_path, capture.env(), {"configure": with_cert}, mqtt=mqtt)
    try:
        job = say(daemon, text="Certified.")
        daemon.recorder.event(job, "finished")
    finally:
        daemon.stop()


def test_without_a_client_certificate_the_broker_refuses(client_cert_broker, capture, tmp_path):
    broker, ca = client_cert_broker
    cert, key = issue_cert(tmp_path, ca, "recorder", None)
    options = {
        "configure": lambda c: c.tls_set(str(ca[0]), certfile=str(cert), keyfile=str(key)),
        "host": "localhost",
    }
    mqtt = {"host": "localhost", "tls": {"ca_file": str(ca[0])}}
    daemon = Daemon(broker, tmp_path, capture.env(), options, wait_online=False, mqtt=mqtt)
    try:
        assert daemon.log_says("ended before it was accepted")
        assert daemon.log_says("certificate required")
        assert daemon.process.poll() is None
    finally:
        daemon.stop()


@pytest.fixture
def acl_broker(tmp_path):
    """The shipped ACL example, with two speakers and a controller."""
    passwords = tmp_path / "passwd"
    for number, user in enumerate(("hall", "kitchen", "controller")):
        create = ["-c"] if number == 0 else []
        subprocess.run(["mosquitto_passwd", "-b", *create, str(passwords), user, "pw"], check=True)
    acl = REPO / "config" / "mosquitto.acl"
    broker = Broker.start(
        tmp_path, extra=f"allow_anonymous false\npassword_file {passwords}\nacl_file {acl}"
    )
    yield broker
    broker.stop()


def as_user(name: str):
    return lambda client: client.username_pw_set(name, "pw")


def test_acl_example_keeps_a_speaker_to_its_own_topics(acl_broker, capture, tmp_path):
    password = password_file(tmp_path, "pw")
    mqtt = {"username": "kitchen", "password_file": str(password)}
    options = {"configure": as_user("controller")}
    daemon = Daemon(
        acl_broker, tmp_path, capture.env(), options, base="fastvoice/kitchen", mqtt=mqtt
    )
    hall = Recorder(acl_broker.port, "fastvoice/hall", configure=as_user("hall"))
    try:
        # The hall speaker's credentials can neither command the kitchen nor read it.
        hall.publish_to("fastvoice/kitchen/say", '{"id": "from-hall", "text": "Intruder."}')
        # Were the kitchen readable, its retained status would reach the hall before the hall's
        # own later message does (one session, in order).
        hall.subscribe("fastvoice/kitchen/#")
        hall.publish("ping", "after subscribing")
        hall.wait_for(lambda topic, _: topic == "fastvoice/hall/ping")
        assert [topic for topic, _, _ in hall.seen if topic.startswith("fastvoice/kitchen/")] == []
        # The controller's command, sent after the hall's was handled, is the only one served.
        job = say(daemon, text="Controller speaking.")
        daemon.recorder.event(job, "finished")
        assert daemon.recorder.events("from-hall") == []
        # The kitchen box itself works inside its own topics.
        status = daemon.recorder.wait_for(lambda topic, _: topic == "fastvoice/kitchen/status")
        assert status[1] == b"online"
    finally:
        hall.close()
        daemon.stop()
