#!/usr/bin/python3
"""browser_check.py - load an HTML report in headless Debian chromium and check it.

    /usr/bin/python3 tests/browser_check.py REPORT.html --figures N --screenshot OUT.png

Drives chromium over the DevTools protocol on a pipe (--remote-debugging-pipe:
JSON messages separated by NUL bytes, chromium reading fd 3 and writing fd 4),
so the test needs nothing but chromium and the Python standard library. It
fails (exit 1, one line per problem) unless:
  - the page loaded, with exactly N figures, each an inline <svg> laid out at
    a non-zero size whose drawing has a non-zero bounding box, every <img>
    (if any) decoded, and every <use href="#id"> resolving to an element;
  - no id appears twice (the figures' definitions do not collide);
  - no console message of level error or warning, no uncaught exception, no
    log entry of level error;
  - the page requested nothing but itself (no font, script, image or style
    sheet from anywhere else) and holds no <script>, so it works with
    JavaScript off;
  - at a laptop's 1366 px and a projector's 1024 px the page itself never
    scrolls sideways (wide tables scroll inside their own box) and the body
    text is at least 16 px.
It then saves a full-page screenshot at 1366 px. Exit 2 for bad usage or when
chromium cannot be started.
"""
import argparse
import base64
import fcntl
import select
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
    "--disable-dev-shm-usage",   # containers give /dev/shm 64 MB
    "--remote-debugging-pipe",
]

PAGE_FACTS = r"""
(() => {
  const XL = 'http://www.w3.org/1999/xlink';
  const figs = [...document.querySelectorAll('figure.plot')].map(f => {
    const svg = f.querySelector('svg');
    if (!svg) return {id: f.id, svg: false};
    const r = svg.getBoundingClientRect();
    let bw = 0, bh = 0;
    try { const b = svg.getBBox(); bw = b.width; bh = b.height; } catch (e) {}
    return {id: f.id, svg: true, w: r.width, h: r.height, bw: bw, bh: bh,
            marks: svg.querySelectorAll('path, line, polyline, polygon, rect, circle, use, text').length};
  });
  const imgs = [...document.images].map(i => ({src: i.src.slice(0, 80), ok: i.complete && i.naturalWidth > 0}));
  const broken_use = [...document.querySelectorAll('use')].filter(u => {
    const h = u.getAttribute('href') || u.getAttributeNS(XL, 'href') || '';
    return !(h.startsWith('#') && document.getElementById(h.slice(1)));
  }).length;
  const seen = {}; let dup = 0;
  for (const e of document.querySelectorAll('[id]')) { if (seen[e.id]) dup++; seen[e.id] = 1; }
  const handlers = [...document.querySelectorAll('*')].filter(e =>
    [...e.attributes].some(a => a.name.startsWith('on'))).length;
  return {
    title: document.title, figs: figs, imgs: imgs, broken_use: broken_use, dup_ids: dup,
    scripts: document.scripts.length, handlers: handlers,
    externals: document.querySelectorAll('link[href], iframe, object, embed, video, audio').length,
    scroll_w: document.documentElement.scrollWidth, client_w: document.documentElement.clientWidth,
    font_px: parseFloat(getComputedStyle(document.body).fontSize),
    h2: [...document.querySelectorAll('h2')].map(h => h.textContent),
    height: document.documentElement.scrollHeight
  };
})()
"""


class Chromium:
    """A chromium process and one page session, over the DevTools pipe."""

    def __init__(self, binary, timeout):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="kvlab-chromium-")
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        # fd numbers 3 and 4 in the child; duplicate above 10 first so that the
        # dup2 calls cannot overwrite each other and clear close-on-exec
        hi_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
        hi_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)

        def child_fds():
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([binary, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}"],
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                     preexec_fn=child_fds, close_fds=False)
        for fd in (to_child_r, from_child_w, hi_r, hi_w):
            os.close(fd)
        self.buf = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def _read_message(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("chromium did not answer in time")
            r, _, _ = select.select([self.from_child], [], [], left)
            if not r:
                continue
            chunk = os.read(self.from_child, 1 << 20)
            if not chunk:
                raise ConnectionError("chromium closed the DevTools pipe")
            self.buf += chunk
        msg, _, self.buf = self.buf.partition(b"\0")
        return json.loads(msg)

    def send(self, method, params=None, session=True):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error'].get('message')}")
                return m.get("result", {})
            if "method" in m:
                self.events.append(m)

    def wait_event(self, method):
        for i, e in enumerate(self.events):
            if e["method"] == method:
                return self.events.pop(i)
        deadline = time.monotonic() + self.timeout
        while True:
            m = self._read_message(deadline)
            if m.get("method") == method:
                return m
            if "method" in m:
                self.events.append(m)

    def drain(self, seconds):
        """Collect the events that arrive within `seconds`."""
        deadline = time.monotonic() + seconds
        try:
            while True:
                m = self._read_message(deadline)
                if "method" in m:
                    self.events.append(m)
        except TimeoutError:
            pass

    def close(self):
        try:
            if self.proc.poll() is None:
                try:
                    os.write(self.to_child, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
                except OSError:
                    pass
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)

    def stderr_tail(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace").strip().splitlines()[-5:]


def check(args):
    page = os.path.abspath(args.report)
    if not os.path.isfile(page):
        print(f"browser_check: {args.report} not found", file=sys.stderr)
        return 2
    url = "file://" + page
    binary = shutil.which(args.chromium) or args.chromium
    try:
        cr = Chromium(binary, args.timeout)
    except OSError as e:
        print(f"browser_check: cannot start {args.chromium}: {e.strerror} "
              "(apt-get install chromium)", file=sys.stderr)
        return 2
    problems = []
    try:
        try:
            target = cr.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        except (TimeoutError, ConnectionError) as e:
            print(f"browser_check: chromium did not start: {e}; its last lines: "
                  + " | ".join(cr.stderr_tail()), file=sys.stderr)
            return 2
        cr.session = cr.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                             session=False)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            cr.send(f"{domain}.enable")
        facts = {}
        for width, height in ((1024, 768), (1366, 768)):   # projector, then laptop
            cr.send("Emulation.setDeviceMetricsOverride",
                    {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
            cr.events = [e for e in cr.events if e["method"] != "Page.loadEventFired"]
            cr.send("Page.navigate", {"url": url})
            cr.wait_event("Page.loadEventFired")
            cr.drain(0.5)
            res = cr.send("Runtime.evaluate", {"expression": PAGE_FACTS, "returnByValue": True})
            if "exceptionDetails" in res:
                raise RuntimeError("the page check script failed: "
                                   + res["exceptionDetails"].get("text", "?"))
            facts[width] = f = res["result"]["value"]
            if f["scroll_w"] > f["client_w"]:
                problems.append(f"at {width} px the page scrolls sideways ({f['scroll_w']} px wide)")
            if f["font_px"] < 16:
                problems.append(f"at {width} px the body text is {f['font_px']} px (< 16)")
        f = facts[1366]

        # figures
        if len(f["figs"]) != args.figures:
            problems.append(f"{len(f['figs'])} figures on the page, expected {args.figures}")
        for g in f["figs"]:
            if not g["svg"]:
                problems.append(f"figure {g['id']}: no inline <svg>")
            elif not (g["w"] > 0 and g["h"] > 0 and g["bw"] > 0 and g["bh"] > 0 and g["marks"] > 10):
                problems.append(f"figure {g['id']}: not rendered (box {g['w']:.0f}x{g['h']:.0f}, "
                                f"drawing {g['bw']:.0f}x{g['bh']:.0f}, {g['marks']} marks)")
        for i in f["imgs"]:
            if not i["ok"]:
                problems.append(f"broken image {i['src']}")
        if f["broken_use"]:
            problems.append(f"{f['broken_use']} <use> elements point at no element")
        if f["dup_ids"]:
            problems.append(f"{f['dup_ids']} duplicate ids")
        if f["scripts"] or f["handlers"]:
            problems.append(f"{f['scripts']} <script> elements and {f['handlers']} event "
                            "handlers: the page must work with JavaScript off")
        if f["externals"]:
            problems.append(f"{f['externals']} <link>/<iframe>/<object> elements")

        # console, exceptions, network
        for e in cr.events:
            m, p = e["method"], e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
                text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
                problems.append(f"console {p['type']}: {text[:200]}")
            elif m == "Runtime.exceptionThrown":
                problems.append("uncaught exception: "
                                + p.get("exceptionDetails", {}).get("text", "?")[:200])
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error", "warning"):
                problems.append(f"log {p['entry']['level']}: {p['entry'].get('text', '')[:200]}")
            elif m == "Network.requestWillBeSent":
                u = p.get("request", {}).get("url", "")
                if u != url and not u.startswith("data:"):
                    problems.append(f"the page requested {u[:120]}")
            elif m == "Network.loadingFailed":
                problems.append(f"a load failed: {p.get('errorText', '?')}")

        # full-page screenshot at the laptop width
        height = min(int(f["height"]), 30000)
        cr.send("Emulation.setDeviceMetricsOverride",
                {"width": 1366, "height": height, "deviceScaleFactor": 1, "mobile": False})
        shot = cr.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        os.makedirs(os.path.dirname(os.path.abspath(args.screenshot)), exist_ok=True)
        tmp = args.screenshot + ".tmp"
        with open(tmp, "wb") as out:
            out.write(base64.b64decode(shot["data"]))
        os.replace(tmp, args.screenshot)
    except (TimeoutError, ConnectionError, RuntimeError) as e:
        problems.append(f"browser session failed: {e}")
    finally:
        cr.close()

    if problems:
        for p in problems:
            print(f"browser_check: {args.report}: {p}", file=sys.stderr)
        return 1
    print(f"browser_check: {args.report}: {len(f['figs'])} figures rendered, no console "
          f"errors, no requests beyond the page, no script; sections: {', '.join(f['h2'])}; "
          f"screenshot {args.screenshot} (1366 x {height})")
    return 0


def main():
    ap = argparse.ArgumentParser(description="check an HTML report in headless chromium")
    ap.add_argument("report")
    ap.add_argument("--figures", type=int, required=True, help="figures the page must show")
    ap.add_argument("--screenshot", required=True, help="PNG to write (full page, 1366 px)")
    ap.add_argument("--chromium", default=os.environ.get("CHROMIUM", "chromium"))
    ap.add_argument("--timeout", type=float, default=120, help="seconds per browser answer")
    return check(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
