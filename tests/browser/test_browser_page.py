"""The example browser page (examples/browser) in headless Chromium against ``twistd rsocket``.

The server is a real ``twistd -n rsocket`` child process listening with a ``ws:`` endpoint string
on a free loopback port, serving the built page (``static=examples/browser/dist``) and the
WebSocket endpoint (``path=/rsocket``) on that one port, with the demo responder plus a log line
per request (``browser_responder.py``). Selenium drives Debian's chromium through
``/usr/bin/chromedriver`` (selenium-manager downloads nothing). The page is loaded from the
server, connects to ``ws://<its host>/rsocket`` by itself, and the test submits the
request-response form and starts a request-stream, waiting (WebDriverWait) for the response and
every streamed item to appear, then checks in the server's log that the server received exactly
those requests.

Needs ``make browser`` (npm ci + esbuild into examples/browser/dist) and ``make chromium``;
``make test`` runs both first.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DIST = REPO / "examples" / "browser" / "dist"
HERE = Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

#: ``twistd`` itself, run with ``python -c`` (so the working directory is on sys.path and the
#: repository's twisted/plugins are found whatever the install mode).
TWISTD = "import sys; sys.argv[0] = 'twistd'; from twisted.scripts.twistd import run; run()"

#: Seconds for anything to happen: server start, page load, connection, each wait.
TIMEOUT = 60

#: More items than the page's REQUEST_N window (16), so the page must renew its credit.
STREAM_COUNT = 40


class Server:
    """A ``twistd -n rsocket`` child serving the page and RSocket over WebSocket."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self._lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            with self._changed:
                self._lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._lines.append("")  # EOF marker
            self._changed.notify_all()

    @property
    def output(self) -> str:
        with self._changed:
            return "".join(self._lines)

    def wait_for(self, pattern: str, timeout: float = TIMEOUT) -> re.Match:
        """The first match of ``pattern`` in the output; AssertionError on exit or time-out."""
        regex = re.compile(pattern)
        found: list[re.Match] = []

        def ready() -> bool:
            match = regex.search("".join(self._lines))
            if match:
                found.append(match)
                return True
            return bool(self._lines) and self._lines[-1] == ""

        with self._changed:
            self._changed.wait_for(ready, timeout)
        if not found:
            raise AssertionError(
                f"server output has no match for {pattern!r} (exit code "
                f"{self.process.poll()}):\n{self.output}"
            )
        return found[0]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(TIMEOUT)
        self._reader.join(TIMEOUT)


@pytest.fixture(scope="module")
def dist() -> Path:
    missing = [name for name in ("index.html", "app.js") if not (DIST / name).is_file()]
    if missing:
        pytest.fail(
            f"the browser page is not built ({', '.join(missing)} missing in {DIST}): run "
            "`make browser` (npm ci + esbuild; `make test` runs it first)",
            pytrace=False,
        )
    return DIST


@pytest.fixture(scope="module")
def server(dist):
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    argv = [
        sys.executable, "-c", TWISTD, "-n", "--pidfile=", "rsocket",
        "--listen", f"ws:port=0:interface=127.0.0.1:path=/rsocket:static={dist}",
        "--responder", "browser_responder:RecordingDemoResponder",
    ]  # fmt: skip
    process = subprocess.Popen(
        argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, encoding="utf-8", errors="replace", bufsize=1,
    )  # fmt: skip
    server = Server(process)
    try:
        match = server.wait_for(r"listening on 127\.0\.0\.1:(\d+)")
        server.port = int(match.group(1))
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not os.access(path, os.X_OK)]
    if missing:
        pytest.fail(
            f"{' and '.join(missing)} not found: run `make chromium` (Debian's chromium and "
            "chromium-driver; `make test` runs it first)",
            pytrace=False,
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):  # fmt: skip
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(TIMEOUT)
    try:
        yield driver
    finally:
        driver.quit()


def _diagnostics(driver, server) -> str:
    try:
        console = "\n".join(entry["message"] for entry in driver.get_log("browser"))
    except Exception as e:  # the log is only a help for reading a failure
        console = f"(no browser log: {e})"
    body = driver.find_element("tag name", "body").text
    return f"page:\n{body}\nbrowser console:\n{console}\nserver output:\n{server.output}"


def _wait(driver, server, condition, what: str):
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, TIMEOUT).until(condition)
    except TimeoutException:
        message = f"timed out waiting for {what}\n{_diagnostics(driver, server)}"
        raise AssertionError(message) from None


def _state(element_id: str, state: str):
    def check(driver):
        element = driver.find_element("id", element_id)
        return element if element.get_attribute("data-state") == state else False

    return check


def _open(driver, server, url: str) -> None:
    driver.get(url)
    assert driver.title == "rsocket_tx browser example", _diagnostics(driver, server)


def _fill(driver, element_id: str, value: str) -> None:
    field = driver.find_element("id", element_id)
    field.clear()
    field.send_keys(value)


def test_page_request_response_and_stream(server, driver):
    base = f"http://127.0.0.1:{server.port}"
    _open(driver, server, f"{base}/")
    status = _wait(driver, server, _state("status", "connected"), "the page to connect")
    assert status.text == "connected"
    assert driver.find_element("id", "url").text == f"ws://127.0.0.1:{server.port}/rsocket"

    # request-response: the server echoes what was typed
    message = f"hello from chromium {uuid.uuid4().hex}"
    _fill(driver, "rr-input", message)
    driver.find_element("id", "rr-send").click()
    response = _wait(driver, server, _state("rr-response", "done"), "the response")
    assert response.text == message
    server.wait_for(re.escape(f"browser-test saw request-response data={message!r}"))

    # request-stream: every item appears, in order, then the completion
    _fill(driver, "stream-input", str(STREAM_COUNT))
    driver.find_element("id", "stream-start").click()
    status = _wait(driver, server, _state("stream-status", "complete"), "the stream to complete")
    assert status.text == f"complete: {STREAM_COUNT} items"
    items = [li.text for li in driver.find_elements("css selector", "#stream-items li")]
    assert items == [str(i) for i in range(STREAM_COUNT)]
    server.wait_for(re.escape(f"browser-test saw request-stream data={str(STREAM_COUNT)!r}"))

    # a second request-response on the same connection, with non-ASCII text
    _fill(driver, "rr-input", "grüße ✓")
    driver.find_element("id", "rr-send").click()
    _wait(
        driver, server,
        lambda d: d.find_element("id", "rr-response").text == "grüße ✓",
        "the second response",
    )  # fmt: skip
    server.wait_for(re.escape("browser-test saw request-response data='grüße ✓'"))


def test_page_shows_stream_errors(server, driver):
    """A request-stream the demo responder rejects (data is not a count) shows the server's
    ERROR message on the page."""
    _open(driver, server, f"http://127.0.0.1:{server.port}/index.html")
    _wait(driver, server, _state("status", "connected"), "the page to connect")
    _fill(driver, "stream-input", "many")
    driver.find_element("id", "stream-start").click()
    status = _wait(driver, server, _state("stream-status", "error"), "the stream error")
    assert "decimal count" in status.text
    server.wait_for(re.escape("browser-test saw request-stream data='many'"))


def test_url_query_parameter_overrides_the_server(server, driver):
    """``?url=`` replaces the default ws://<host>/rsocket: a path with no WebSocket endpoint
    there fails to connect, and the page says so."""
    url = f"ws://127.0.0.1:{server.port}/not-rsocket"
    _open(driver, server, f"http://127.0.0.1:{server.port}/?url={url}")
    _wait(driver, server, _state("status", "error"), "the connection failure")
    assert driver.find_element("id", "url").text == url
