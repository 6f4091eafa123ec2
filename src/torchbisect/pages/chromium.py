"""Headless Chromium driven over the DevTools protocol on a pipe, with the standard library only.

Playwright cannot download its browsers here, and Debian's chromium is enough: `--remote-debugging-
pipe` reads protocol commands on fd 3 and writes replies on fd 4, NUL-separated JSON.  The page is
opened at a given viewport (a phone: mobile emulation, so `<meta name=viewport>` applies), then
measured with `Runtime.evaluate`, clicked with real mouse events, and captured as PNG.  One
chromium process serves every page a test process opens, each page in a browser context of its own.

    python src/torchbisect/pages/chromium.py PAGE.html OUT.png 390x844 [SELECTOR]  # a screenshot,
                                                # after a click on SELECTOR when one is given
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--hide-scrollbars",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
    "about:blank",
]


def executable() -> str:
    return shutil.which("chromium") or shutil.which("chromium-browser") or "chromium"


class _Chromium:
    """The one chromium process of this test process, shared by every `Browser` (a launch costs
    about half a second of CPU, and the suite opens some fifty pages).  Each Browser gets a browser
    context of its own, so no page sees another's storage, cache or cookies."""

    def __init__(self) -> None:
        to_child, self._out = os.pipe()
        self._in, from_child = os.pipe()
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child, from_child)]
        self._profile = tempfile.mkdtemp(prefix="chromium-profile-")

        def fds() -> None:  # in the child: the protocol's fixed descriptors
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        # not utils/proc: a standalone script, and the protocol's pipes are fds 3 and 4
        self._proc = subprocess.Popen(
            [executable(), *FLAGS[:-1], f"--user-data-dir={self._profile}", FLAGS[-1]],
            # close_fds would close 3 and 4 after `fds` ran; dup2 leaves them inheritable
            close_fds=False,
            preexec_fn=fds,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for fd in (to_child, from_child, *high):
            os.close(fd)
        self._id, self._buf = 0, b""
        self.replies: dict[int, dict[str, Any]] = {}
        self.inbox: dict[str, list[dict[str, Any]]] = {}  # each attached page's events, by session

    def alive(self) -> bool:
        return self._proc.poll() is None

    def send(self, method: str, session: str | None, params: dict[str, Any]) -> int:
        self._id += 1
        message = {"id": self._id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        return self._id

    def pump(self, timeout: float) -> None:
        """Read one message: a reply is kept by its id, an event in its page's inbox."""
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buf:
            if not select.select([self._in], [], [], max(0, deadline - time.monotonic()))[0]:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium exited")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\0", 1)
        message = json.loads(line)
        if "id" in message:
            self.replies[message["id"]] = message
        elif message.get("sessionId") in self.inbox:
            self.inbox[message["sessionId"]].append(message)

    def call(
        self, method: str, session: str | None, timeout: float, **params: Any
    ) -> dict[str, Any]:
        sent = self.send(method, session, params)
        while sent not in self.replies:
            self.pump(timeout)
        reply = self.replies.pop(sent)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        result: dict[str, Any] = reply.get("result", {})
        return result

    def close(self) -> None:
        with contextlib.suppress(Exception):  # best effort: the process is killed below
            self.call("Browser.close", None, 10)
        for fd in (self._out, self._in):
            with contextlib.suppress(OSError):
                os.close(fd)
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        shutil.rmtree(self._profile, ignore_errors=True)


_shared: list[_Chromium] = []


def _chromium() -> _Chromium:
    """The shared process, launched on first use (and again if it died); closed at exit."""
    if _shared and not _shared[0].alive():
        _shared.pop().close()
    if not _shared:
        _shared.append(_Chromium())
    return _shared[0]


@atexit.register
def _close_shared() -> None:
    while _shared:
        _shared.pop().close()


class Browser:
    """One page, at one viewport, in a browser context of its own; use as a context manager.
    The chromium process under it is shared (`_Chromium`)."""

    def __init__(self, width: int, height: int, *, mobile: bool = False, timeout: float = 60):
        self.width, self.height, self.mobile, self.timeout = width, height, mobile, timeout
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None

    def __enter__(self) -> Browser:
        self._chromium = _chromium()
        self._context = self.call("Target.createBrowserContext", session=False)["browserContextId"]
        target = self.call(
            "Target.createTarget", session=False, url="about:blank", browserContextId=self._context
        )["targetId"]
        self.session = self.call(
            "Target.attachToTarget", session=False, targetId=target, flatten=True
        )["sessionId"]
        self.events = self._chromium.inbox.setdefault(self.session, [])
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=self.width,
            height=self.height,
            deviceScaleFactor=2 if self.mobile else 1,
            mobile=self.mobile,
        )
        self.call("Page.enable")
        return self

    def __exit__(self, *exc: object) -> None:
        self._chromium.inbox.pop(self.session or "", None)
        with contextlib.suppress(Exception):  # the page and its context go; the process stays
            self.call("Target.disposeBrowserContext", session=False, browserContextId=self._context)

    def call(self, method: str, session: bool = True, **params: Any) -> dict[str, Any]:
        return self._chromium.call(
            method, self.session if session else None, self.timeout, **params
        )

    def open(self, path: Path) -> None:
        self.events.clear()
        self.call("Page.navigate", url=Path(path).resolve().as_uri())
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            self._chromium.pump(self.timeout)

    def eval(self, expression: str) -> Any:  # the expression's value, as JSON reads it
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:60]}…: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click at the centre of the first element matching `selector`."""
        box = self.eval(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " e.scrollIntoView({block: 'center', inline: 'center'});"
            " const r = e.getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2]; })()"
        )
        for kind in ("mousePressed", "mouseReleased"):
            self.call(
                "Input.dispatchMouseEvent",
                type=kind,
                x=box[0],
                y=box[1],
                button="left",
                clickCount=1,
            )

    def screenshot(self, out: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        Path(out).write_bytes(base64.b64decode(data))
        return Path(out)


def screenshot(page: Path, out: Path, width: int, height: int, click: str = "") -> Path:
    """The page at `width`×`height` (a phone below 600 px), after a click on `click` if given:
    the opened page shows what the click opened, scrolled into view."""
    with Browser(width, height, mobile=width < 600) as browser:
        browser.open(page)
        if click and browser.eval(f"!!document.querySelector({json.dumps(click)})"):
            browser.click(click)
        return browser.screenshot(out)


if __name__ == "__main__":
    size = sys.argv[3].split("x")
    print(
        screenshot(Path(sys.argv[1]), Path(sys.argv[2]), int(size[0]), int(size[1]), *sys.argv[4:5])
    )


# the page's one contrast measure
CONTRAST_JS = r"""(() => {
  const rgb = s => (s.match(/[\d.]+/g) || []).map(Number);
  const lum = c => { const v = c.slice(0, 3).map(x => { x /= 255;
      return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); });
    return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2]; };
  const out = [];
  for (const el of document.body.querySelectorAll('*')) {
    if (el.closest('svg') || !el.getClientRects().length) continue;
    const text = [...el.childNodes].filter(n => n.nodeType === 3).map(n => n.data).join('').trim();
    if (!text) continue;
    let bg = null, alpha = 1;
    for (let e = el; e; e = e.parentElement) {
      const st = getComputedStyle(e);
      alpha *= Number(st.opacity);
      const b = rgb(st.backgroundColor);
      if (!bg && b.length === 3 || (b.length === 4 && b[3] > 0.99)) bg = bg || b;
    }
    bg = bg || [255, 255, 255];
    const fg = rgb(getComputedStyle(el).color);
    const a = alpha * (fg.length === 4 ? fg[3] : 1);
    const mixed = [0, 1, 2].map(i => fg[i] * a + bg[i] * (1 - a));
    const [hi, lo] = [lum(mixed), lum(bg)].sort((x, y) => y - x);
    out.push({text: text.slice(0, 40), ratio: (hi + 0.05) / (lo + 0.05),
              size: getComputedStyle(el).fontSize});
  }
  return out;
})()"""
