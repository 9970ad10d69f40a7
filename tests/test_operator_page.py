"""The operator page in a real headless browser (Debian's chromium through selenium), against a
running service: a sentence typed and spoken to the ALSA capture device, a chime chosen to play
before the speech, the volume slider reaching the broker, a queued job stopped from its button.
Screenshots go to the test's temporary directory (their paths are printed)."""

from __future__ import annotations

import json
import shutil
import uuid

import numpy as np
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service as ChromeService
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import Select, WebDriverWait

from daemon.audio.sounds import SoundLibrary
from tests.conftest import EMBEDDED_RATE
from tests.daemon_helpers import Daemon
from tests.mqtt_helpers import free_port

CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMEDRIVER is None, reason="needs chromium-driver (tools/setup-dev.sh installs it)"
)


@pytest.fixture(scope="module")
def service(broker, alsa, tmp_path_factory):
    port = free_port()
    running = Daemon(
        broker,
        tmp_path_factory.mktemp("page"),
        alsa.env(),
        mqtt={"client_id": f"fv-{uuid.uuid4().hex[:6]}", "zones": ["lobby", "gate-3"]},
        http={"listen": f"127.0.0.1:{port}"},
        schedules=[{"name": "new-year", "cron": "0 3 1 1 *", "text": "Happy new year."}],
    )
    running.url = f"http://127.0.0.1:{port}/"
    yield running
    running.stop()


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1100,900",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=ChromeService(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


@pytest.fixture
def page(browser, service):
    browser.get(service.url)
    WebDriverWait(browser, 30).until(
        expected_conditions.text_to_be_present_in_element((By.ID, "health"), "serving")
    )
    return browser


def event_shown(event: str):
    return expected_conditions.presence_of_element_located(
        (By.CSS_SELECTOR, f'#events li[data-event="{event}"]')
    )


def test_the_page_is_self_contained(page):
    sources = page.execute_script(
        "return [...document.querySelectorAll('[src],[href]')].map(e => e.src || e.href)"
    )
    assert sources == []  # no CDN, no fonts, no scripts from elsewhere: the box is offline
    assert "en_US-joe-medium" in page.find_element(By.ID, "status").text


def test_the_status_shows_the_zones_quiet_hours_and_the_next_schedule(page):
    facts = dict(
        zip(
            (term.text for term in page.find_elements(By.CSS_SELECTOR, "#status dt")),
            (value.text for value in page.find_elements(By.CSS_SELECTOR, "#status dd")),
            strict=True,
        )
    )
    assert facts["zones"] == "lobby, gate-3"
    assert facts["quiet hours"] == "not now"
    assert facts["next schedule"].startswith("new-year at ")
    assert "render queue" not in facts  # no render group configured


def test_typing_a_sentence_speaks_it(page, service, capture, tmp_path):
    page.find_element(By.ID, "text").send_keys("The operator page is working.")
    page.find_element(By.ID, "say").click()
    WebDriverWait(page, 60).until(event_shown("finished"))
    assert np.trim_zeros(capture.played()).size > 0.5 * EMBEDDED_RATE
    WebDriverWait(page, 10).until(
        lambda driver: driver.find_elements(By.CSS_SELECTOR, "#chart rect")
    )
    screenshot = tmp_path / "operator-page.png"
    page.save_screenshot(str(screenshot))
    print(f"screenshot: {screenshot}")
    assert screenshot.stat().st_size > 10_000


def test_a_chime_chosen_on_the_page_plays_before_the_speech(page, service, capture):
    WebDriverWait(page, 30).until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, '#chime [value="alarm"]'))
    )
    Select(page.find_element(By.ID, "chime")).select_by_value("alarm")
    page.find_element(By.ID, "text").send_keys("The alarm chime came first.")
    page.find_element(By.ID, "say").click()
    WebDriverWait(page, 60).until(event_shown("finished"))
    chime = SoundLibrary().render("alarm", EMBEDDED_RATE)
    start = np.trim_zeros(capture.played(), "f")[: len(chime)]
    likeness = np.dot(start, chime) / (np.linalg.norm(start) * np.linalg.norm(chime))
    assert likeness > 0.9


def test_the_volume_slider_reaches_the_broker(page, service):
    slider = page.find_element(By.ID, "volume")
    slider.click()  # the middle of the track: 0.5
    slider.send_keys(Keys.ARROW_LEFT)
    service.recorder.wait_for(lambda t, p: t.endswith("/volume/state") and p == b"0.45")
    assert page.find_element(By.ID, "volume-value").text == "0.45"


def test_a_queued_job_is_stopped_from_its_button(page, service):
    service.recorder.publish("pause", b"true")
    job = uuid.uuid4().hex[:10]
    service.recorder.publish("say", json.dumps({"id": job, "text": "Waiting in the queue."}))
    service.recorder.event(job, "queued")
    button = WebDriverWait(page, 30).until(
        expected_conditions.element_to_be_clickable((By.CSS_SELECTOR, "#jobs li button"))
    )
    button.click()
    interrupted = service.recorder.event(job, "interrupted")
    assert interrupted["reason"] == "stopped"
    service.recorder.publish("pause", b"false")
