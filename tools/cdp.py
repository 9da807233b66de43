"""One headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`): no
websocket library, no port. Used to draw the site's diagrams at build time (tools/prep_docs.py) and by the
browser checks (tests/test_docs_browser.py).

    with Browser() as b:
        tab = b.tab()
        tab.goto('http://127.0.0.1:8000/index.html')
        tab.eval('document.title')
        tab.requests            # every URL the tab (and its workers) asked for since the last `goto`
"""
import json, os, select, shutil, subprocess, tempfile, time

FLAGS = ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
         '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-dev-shm-usage',
         '--disable-quic', '--hide-scrollbars', '--remote-debugging-pipe']

def chromium_path():
    "The Chromium binary on PATH (Debian's `chromium`), or None."
    return shutil.which('chromium') or shutil.which('chromium-browser')

class Browser:
    "A headless Chromium with a fresh profile, spoken to over fds 3 (commands) and 4 (replies and events)."
    def __init__(self, binary=None, timeout=30):
        self.binary, self.timeout = binary or chromium_path(), timeout
        if not self.binary: raise RuntimeError('headless Chromium is not installed (`make browser` installs it)')
        self._id, self._buf, self._events, self.sessions = 0, b'', [], {}

    def __enter__(self):
        self._prof = tempfile.mkdtemp(prefix='cdp-profile-')
        to_chrome_r, self._w = os.pipe()
        self._r, from_chrome_w = os.pipe()
        def fds():  # the child's fd 3 reads our commands, its fd 4 writes its replies
            a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(a, 3); os.dup2(b, 4)
        self.proc = subprocess.Popen([self.binary, *FLAGS, f'--user-data-dir={self._prof}', 'about:blank'],
                                     preexec_fn=fds, close_fds=False, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r); os.close(from_chrome_w)
        os.set_inheritable(self._w, False); os.set_inheritable(self._r, False)
        return self

    def __exit__(self, *exc):
        try: self.send('Browser.close')
        except Exception: pass
        try: self.proc.wait(5)
        except subprocess.TimeoutExpired: self.proc.kill(); self.proc.wait()
        for fd in (self._w, self._r): os.close(fd)
        shutil.rmtree(self._prof, ignore_errors=True)

    def _read(self, deadline):
        "The next message from Chromium (None when `deadline` passes first)."
        while b'\0' not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._r], [], [], left)[0]: return None
            chunk = os.read(self._r, 1 << 20)
            if not chunk: raise RuntimeError('Chromium closed its DevTools pipe')
            self._buf += chunk
        msg, self._buf = self._buf.split(b'\0', 1)
        return json.loads(msg)

    def _dispatch(self, m):
        "Keep an event; track the sessions of workers and frames that attach themselves."
        if m.get('method') == 'Target.attachedToTarget':
            sid = m['params']['sessionId']
            parent = self.sessions.get(m.get('sessionId'))
            if parent is not None:
                self.sessions[sid] = parent
                for cmd in ('Network.enable', 'Runtime.runIfWaitingForDebugger'): self.send(cmd, session=sid, wait=False)
        self._events.append(m)

    def send(self, method, session=None, wait=True, **params):
        "Send a command; its result (an error raises)."
        self._id += 1
        msg = {'id': self._id, 'method': method, 'params': params}
        if session: msg['sessionId'] = session
        os.write(self._w, json.dumps(msg).encode() + b'\0')
        if not wait: return None
        me, deadline = self._id, time.monotonic() + self.timeout
        while True:
            m = self._read(deadline)
            if m is None: raise TimeoutError(f'{method}: no answer in {self.timeout} s')
            if m.get('id') == me:
                if 'error' in m: raise RuntimeError(f"{method}: {m['error']}")
                return m.get('result', {})
            if 'method' in m: self._dispatch(m)

    def pump(self, seconds):
        "Read events for `seconds`."
        deadline = time.monotonic() + seconds
        while (m := self._read(deadline)) is not None:
            if 'method' in m: self._dispatch(m)

    def visit(self, urls, fn, tabs=3, width=1280, height=900, settle=0.3):
        "`{url: fn(tab)}` for every one of `urls`, loaded `tabs` at a time in tabs of `width` x `height`, each once settled."
        todo, free, busy, out = list(urls)[::-1], [self.tab(width, height) for _ in range(tabs)], {}, {}
        while todo or busy:
            while free and todo:
                t = free.pop(); busy[t] = todo.pop(); t.start(busy[t])
            self.pump(0.02)
            for t, url in list(busy.items()):
                if t.settled(settle): out[url] = fn(t); del busy[t]; free.append(t)
        return out

    def tab(self, width=1280, height=900):
        "A new tab of `width` x `height` CSS pixels, its network watched (workers included)."
        tid = self.send('Target.createTarget', url='about:blank')['targetId']
        sid = self.send('Target.attachToTarget', targetId=tid, flatten=True)['sessionId']
        t = Tab(self, sid)
        self.sessions[sid] = t
        for cmd in ('Page.enable', 'Network.enable', 'Runtime.enable'): self.send(cmd, session=sid)
        self.send('Target.setAutoAttach', session=sid, autoAttach=True, waitForDebuggerOnStart=False, flatten=True)
        t.size(width, height)
        return t

class Tab:
    "One tab: load a URL, evaluate script, take a screenshot; `requests` lists what it fetched."
    def __init__(self, browser, session): self.b, self.sid, self.requests = browser, session, []

    def size(self, width, height):
        self.send('Emulation.setDeviceMetricsOverride', width=width, height=height, deviceScaleFactor=1,
                  mobile=width < 600)

    def send(self, method, **params): return self.b.send(method, session=self.sid, **params)

    def _collect(self):
        "Move this tab's (and its workers') request events into `requests`; True when the page has loaded."
        loaded, keep = False, []
        for m in self.b._events:
            if self.b.sessions.get(m.get('sessionId')) is not self: keep.append(m); continue
            if m['method'] == 'Network.requestWillBeSent': self.requests.append(m['params']['request']['url'])
            elif m['method'] == 'Page.loadEventFired': loaded = True
        self.b._events = keep
        return loaded

    def start(self, url, timeout=20):
        "Begin loading `url` without waiting: `settled` says when it has loaded and gone quiet."
        self.requests, self._loaded, self._quiet_since, self._n = [], False, None, -1
        self._deadline, self._url = time.monotonic() + timeout, url
        self.b._events = [m for m in self.b._events if self.b.sessions.get(m.get('sessionId')) is not self]
        self.send('Page.navigate', url=url)

    def settled(self, settle=0.3)->bool:
        "True once the page `start` began has fired its load event and no request has started for `settle` seconds."
        self._loaded |= self._collect()
        now = time.monotonic()
        if now > self._deadline:
            if not self._loaded: raise TimeoutError(f'{self._url}: no load event in time')
            return True
        if not self._loaded: return False
        if len(self.requests) != self._n: self._n, self._quiet_since = len(self.requests), now; return False
        return now - self._quiet_since >= settle

    def goto(self, url, settle=0.3, timeout=20):
        "Load `url`, wait for its load event, then until no request has started for `settle` seconds."
        self.start(url, timeout)
        while not self.settled(settle): self.b.pump(0.05)

    def eval(self, expr):
        "The value of a JavaScript expression (awaited when it is a promise)."
        r = self.send('Runtime.evaluate', expression=expr, returnByValue=True, awaitPromise=True)
        if 'exceptionDetails' in r: raise RuntimeError(f"script failed: {r['exceptionDetails']}")
        return r['result'].get('value')

    def screenshot(self, path, full_page=False):
        "A PNG of the viewport (or the whole page) at `path`."
        import base64
        r = self.send('Page.captureScreenshot', format='png', captureBeyondViewport=full_page)
        open(path, 'wb').write(base64.b64decode(r['data']))
