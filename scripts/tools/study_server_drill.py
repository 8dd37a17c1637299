"""The study drill against the real dashboard server: a study over a trained model's explanations, the
Streamlit server started as `streamlit run app/main.py`, K annotators in real headless Chromium sessions
answering through their study links while the other annotators (30 in all by default) answer at the same time
through the same engine calls the server makes (StudyStore.open_session, record_consent, next_assignment,
submit: one thread and one StudyStore each, in a worker process, on the same SQLite file). Mid-study the
server and the worker are SIGKILLed together (the worker stands for the server's own threads); the server is
restarted on the same port and database, the worker resumes its links, the browsers reload theirs, and all
finish. The figures in docs/studies.md ("Server drill") come from here.

    PYTHONPATH=. python scripts/tools/study_server_drill.py               # 30 annotators, 4 of them in browsers
    PYTHONPATH=. python scripts/tools/study_server_drill.py --browsers 6  # more browsers (about 0.3 GiB each)
    PYTHONPATH=. python scripts/tools/study_server_drill.py --smoke       # tiny and quick (CI runs it)

Checked (exit status 1 when one fails): every answer acknowledged before the kill is in the file right after
it (a browser's acknowledgement is the "N answered" it was shown after Submit; the worker's is a submit call
that returned), and so is every answer acknowledged after the restart; every task ends answered exactly its
overlap; no annotator got an item twice; every annotator finished; SQLite's integrity check says ok.
Without Debian's chromium and chromedriver the drill runs with 0 browsers (and says so).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STOP_LIMIT_S = 20.0  # SIGTERM to exit, at the end of the drill (app.serve's own bound is 15 s)
_STARTED: list = []  # processes and browsers this run started: stopped on the way out, whatever happened
MEASURES = ("grad-l2", "loo-sign", "random")
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
# Chromium with what a drill does not need switched off; each browser is one small renderer (about 0.3 GiB)
BROWSER_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-extensions",
                 "--disable-background-networking", "--disable-component-update", "--no-first-run",
                 "--disable-default-apps", "--mute-audio", "--window-size=1000,1400",
                 "--js-flags=--max-old-space-size=256")


# -- the thread annotators: the worker process ------------------------------------------------------------
def _worker(db: str, tokens: list[str], think: float, seed: int) -> int:
    """Answer every item of `tokens` at once (one thread and one StudyStore each), printing
    `SUBMITTED <submission id> <submit ms> <next ms>` (flushed) after each submit returns."""
    import random

    from engine.annotation.studies import StudyStore
    from engine.annotation.studies.drills import answer_for

    lock = threading.Lock()
    errors: list[str] = []

    def one(k: int, token: str) -> None:
        rng = random.Random(seed * 1000 + k)
        try:
            studies = StudyStore(db)
            session = studies.open_session(token)
            studies.record_consent(session)
            while True:
                t0 = time.perf_counter()
                assignment = studies.next_assignment(session)
                next_ms = 1000 * (time.perf_counter() - t0)
                if assignment is None:
                    return
                time.sleep(think * rng.random() * 2)
                sid = f"{session.participant_id}-{assignment.assignment_id}-{rng.getrandbits(48):012x}"
                t0 = time.perf_counter()
                studies.submit(session, assignment.assignment_id, submission_id=sid, **answer_for(assignment, rng))
                submit_ms = 1000 * (time.perf_counter() - t0)
                with lock:
                    print(f"SUBMITTED {sid} {submit_ms:.2f} {next_ms:.2f}", flush=True)
        except Exception as err:  # recorded, so that one failure does not hide what the others did
            with lock:
                errors.append(f"{type(err).__name__}: {err}")

    threads = [threading.Thread(target=one, args=(k, t)) for k, t in enumerate(tokens)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errors:
        print(f"ERROR {e}", flush=True)
    return 1 if errors else 0


class Worker:
    """The worker process and what it acknowledged (read from its stdout by a thread)."""

    def __init__(self, db: str, tokens: list[str], think: float, seed: int, env: dict):
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", "--db", db, "--think", str(think),
                   "--seed", str(seed), *[f"--token={t}" for t in tokens]]  # "=": a token may start with "-"
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.acked: list[str] = []
        self.submit_ms: list[float] = []
        self.next_ms: list[float] = []
        self.errors: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            parts = line.split()
            if parts[:1] == ["SUBMITTED"]:
                self.acked.append(parts[1])
                self.submit_ms.append(float(parts[2]))
                self.next_ms.append(float(parts[3]))
            elif parts[:1] == ["ERROR"]:
                self.errors.append(line.strip())

    def finish(self, timeout: float) -> int:
        """Wait for the end of the process and of its output; its return code."""
        code = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=30)
        if code:
            self.errors.append(self.proc.stderr.read()[-2000:])
        return code


# -- the server ---------------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, env: dict, log) -> tuple[subprocess.Popen, float]:
    """`streamlit run app/main.py` on `port` (through app.serve, which exits on SIGTERM even with browsers that
    died attached); returns (process, seconds until /_stcore/health said ok)."""
    t0 = time.time()
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.serve", "--server.port", str(port), "--server.address",
         "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read() == b"ok":
                return proc, time.time() - t0
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the server did not come up in 120 s")


# -- the browser annotators ---------------------------------------------------------------------------------
class ServerDown(Exception):
    """The server was killed while this browser was waiting: reload the link once it is back."""


class Browser:
    """One headless Chromium session answering one study link; `acked` is the highest "N answered" it was
    shown after a Submit (what its annotator was told was stored)."""

    def __init__(self, name: str, link: str, drill: Drill):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in BROWSER_FLAGS:
            options.add_argument(flag)
        self.service = Service(CHROMEDRIVER)
        self.driver = webdriver.Chrome(service=self.service, options=options)
        self.name, self.link, self.drill = name, link, drill
        self.acked = 0
        self.acked_before_kill = 0
        self.done = False
        self.ready = threading.Event()  # set at its first task: the thread annotators start when all are there
        self.errors: list[str] = []
        self.reloads = 0
        self.retries: list[str] = []  # steps retried (a widget that missed a keystroke, a click during a redraw)
        self.first_ack_after_restart: float | None = None

    def text(self) -> str:
        from selenium.webdriver.common.by import By

        try:
            return self.driver.find_element(By.TAG_NAME, "body").text
        except Exception:  # a page being replaced: no text this instant
            return ""

    def _until(self, what, timeout: float = 90.0):
        """Poll `what()` until it gives something true; ServerDown when the server is killed meanwhile."""
        generation = self.drill.generation
        deadline = time.time() + timeout
        while True:
            if self.drill.down.is_set() or self.drill.generation != generation:
                raise ServerDown
            try:
                got = what()
            except Exception:  # stale elements while Streamlit redraws
                got = None
            if got:
                return got
            if time.time() > deadline:
                raise TimeoutError(f"{self.name}: the page says {self.text()[-400:]!r}")
            time.sleep(0.2)

    def _click_button(self, label: str) -> None:
        from selenium.webdriver.common.by import By

        def click():
            for b in self.driver.find_elements(By.TAG_NAME, "button"):
                if b.text.strip() == label and b.is_enabled():
                    b.click()
                    return True
            return False
        self._until(click)

    def _pick(self, label: str, option: str) -> None:
        """Choose `option` in the selectbox labelled `label` (type it, Enter) and wait until it shows."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.common.keys import Keys

        def box():
            for element in self.driver.find_elements(By.CSS_SELECTOR, "[data-testid='stSelectbox']"):
                if element.text.strip().startswith(label):
                    return element
            return None

        def chosen():
            element = box()
            field = element.find_element(By.TAG_NAME, "input")
            if (field.get_attribute("value") or element.get_attribute("textContent").replace(label, "", 1).strip()) == option:
                return True
            field.click()
            field.send_keys(option)
            field.send_keys(Keys.ENTER)
            time.sleep(0.3)
            return False
        self._until(chosen, timeout=20)

    def _answer(self) -> None:
        """Rank the explanations on the page (obeying an attention check), Submit, and wait for the next page."""
        from selenium.webdriver.common.by import By

        # the page arrives element by element: wait for its progress line and every rank box
        text = self._until(lambda: (t := self.text()) and re.search(r"Task \d+ of", t) and "Submit and continue" in t
                           and len(set(re.findall(r"Rank of ([A-Z])", t))) == len(MEASURES) and t)
        slots = sorted(set(re.findall(r"Rank of ([A-Z])", text)))
        check = re.search(r"put explanation ([A-Z]) first", text)
        if check:
            ranks = {s: 1 if s == check.group(1) else 2 for s in slots}
        else:
            ranks = {s: i + 1 for i, s in enumerate(slots)}
        for slot, rank in ranks.items():
            self._pick(f"Rank of {slot}", str(rank))
        before = re.search(r"Task (\d+) of", text).group(1)
        self._click_button("Submit and continue")

        def moved():
            page = self.text()
            if "Thank you" in page:
                return page
            now = re.search(r"Task (\d+) of \d+ · (\d+) answered", page)
            return page if now and now.group(1) != before else None
        page = self._until(moved, timeout=20)
        answered = re.search(r"\((\d+) of \d+ answered\)", page) or re.search(r"· (\d+) answered", page)
        if answered and int(answered.group(1)) > self.acked:
            self.acked = int(answered.group(1))
            if self.drill.restarted_at and self.first_ack_after_restart is None:
                self.first_ack_after_restart = time.time() - self.drill.restarted_at
        if self.driver.find_elements(By.CSS_SELECTOR, "[data-testid='stException']"):
            raise RuntimeError(f"{self.name}: an exception on the page: {self.text()[-400:]}")

    def run(self) -> None:
        """Open the link, consent, answer until the done page; after a server kill, reload the link and go on."""
        from selenium.webdriver.common.by import By

        self.driver.get(self.link)
        while not self.done:
            try:
                page = self._until(lambda: (t := self.text()) and any(
                    k in t for k in ("Thank you", "Submit and continue", "I have read the above")) and t)
                if "Thank you" in page:
                    m = re.search(r"\((\d+) of \d+ answered\)", page)
                    self.acked = max(self.acked, int(m.group(1))) if m else self.acked
                    self.done = True
                elif "Submit and continue" in page:
                    self.ready.set()
                    self._answer()
                else:
                    self._until(lambda: [lab.click() or True for lab in self.driver.find_elements(
                        By.XPATH, "//label[contains(., 'I have read the above')]")][:1])
                    self._click_button("Start")
                    self._until(lambda: "Submit and continue" in self.text())
                    self.ready.set()
            except ServerDown:
                self.drill.up.wait()
                self.reloads += 1
                self.driver.get(self.link)  # what an annotator does when the page lost its server
            except Exception as err:
                if self.drill.down.is_set():  # the server died under this step: not the browser's failure
                    self.drill.up.wait()
                    self.reloads += 1
                    self.driver.get(self.link)
                    continue
                # a step that did not take (the page was redrawing): look again and redo it, as a person would;
                # a Submit repeated keeps its submission id (session state), so it stores the answer once
                self.retries.append(f"{type(err).__name__}: {str(err)[:300]}")
                if len(self.retries) > 20:
                    self.errors.append(f"{self.name}: gave up after 20 retries; last: {self.retries[-1]}")
                    return

    def quit(self) -> None:
        try:
            self.driver.quit()
        except Exception:
            pass


def _tree_pss(pids: list[int]) -> int:
    """Bytes of memory (PSS: shared pages split between their users) of these processes and their children."""
    import psutil

    total = 0
    for pid in pids:
        try:
            root = psutil.Process(pid)
            for p in [root, *root.children(recursive=True)]:
                try:
                    total += p.memory_full_info().pss
                except (psutil.Error, AttributeError):
                    continue
        except psutil.Error:
            continue
    return total


class Drill:
    down: threading.Event
    up: threading.Event
    generation: int
    restarted_at: float | None


# -- the drill ----------------------------------------------------------------------------------------------
def make_study(db: str, annotators: int, tasks_per_annotator: int, overlap: int) -> tuple[str, list[str], list[str]]:
    """A study over `tiny` fine-tuned on `toy` (trained now into the scratch models cache unless there):
    the explanations of three measures on the first examples of the train split. Returns (study id, names, tokens)."""
    from engine.annotation.studies import StudyConfig, StudyStore, build_study_tasks
    from engine.smoke import smoke_checkpoint

    model_id = smoke_checkpoint("toy")
    n_tasks = annotators * tasks_per_annotator // overlap
    config = StudyConfig(name="Server drill", model_id=model_id, measures=MEASURES, dataset="toy", split="train",
                         n_examples=n_tasks, tasks_per_annotator=tasks_per_annotator, overlap=overlap,
                         attention_checks=1)
    studies = StudyStore(db)
    study = studies.create(config, build_study_tasks(config), code_version="server-drill")
    names = [f"annotator-{k:02d}" for k in range(1, annotators + 1)]
    return study.id, names, [link.token for link in studies.invite(study.id, names)]


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))], 1)


def verdict(f: dict) -> list[str]:
    """The properties that failed (empty: the drill passed)."""
    failed = []
    if f["lost_at_kill"]:
        failed.append(f"{f['lost_at_kill']} acknowledged answers missing right after the SIGKILL")
    if f["lost"]:
        failed.append(f"{f['lost']} acknowledged answers missing at the end")
    if f["tasks_exact"] != f["tasks"] or f["tasks_over"]:
        failed.append(f"tasks at exactly their overlap: {f['tasks_exact']} of {f['tasks']} ({f['tasks_over']} over)")
    if f["duplicate_items"]:
        failed.append(f"{f['duplicate_items']} items given twice to one annotator")
    if f["unfinished"]:
        failed.append(f"annotators not finished: {f['unfinished']}")
    if f["integrity"] != "ok":
        failed.append(f"integrity check: {f['integrity']}")
    if f["errors"]:
        failed.append(f"errors: {f['errors'][:5]}")
    if not f["killed_mid_study"]:
        failed.append("the kill did not come mid-study (every answer was in before it, or none)")
    if f.get("stopped_on_sigterm") is False:
        failed.append(f"the server did not exit within {STOP_LIMIT_S:g} s of SIGTERM (it was SIGKILLed)")
    return failed


def run(args) -> dict:
    from engine.annotation.studies import StudyStore
    from engine.annotation.studies.drills import invariants

    # a scratch folder, never the project's models or annotations; the CI smoke run shares ENGINE_SMOKE_DIR's
    # models cache (bench/_smoke.py: the smoke checkpoint is trained once for all entries)
    base = Path(os.environ.get("ENGINE_SMOKE_DIR") or tempfile.mkdtemp(prefix="study-server-drill-"))
    root = base / "study_server_drill"
    root.mkdir(parents=True, exist_ok=True)
    os.environ["ENGINE_MODELS_CACHE"] = str(base / "models_cache")
    os.environ.update(ENGINE_RESULTS_DIR=str(root / "results"), ENGINE_USER_DIR=str(root / "user"))
    db = str(root / f"annotations-{os.getpid()}.sqlite3")
    os.environ["ENGINE_ANNOTATIONS_DB"] = db
    study_id, names, tokens = make_study(db, args.annotators, args.tasks_per_annotator, args.overlap)
    k = args.browsers if (CHROMIUM and CHROMEDRIVER) else 0
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               ENGINE_THREADS=os.environ.get("ENGINE_THREADS", "1"), HF_HUB_OFFLINE="1")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(root / "server.log", "a", encoding="utf-8")
    server, first_start = start_server(port, env, log)
    _STARTED.append(server)
    drill = Drill()
    drill.down, drill.up, drill.generation, drill.restarted_at = threading.Event(), threading.Event(), 0, None
    browsers = []
    for i in range(k):
        browsers.append(Browser(names[i], f"{url}/?study_token={tokens[i]}", drill))
        _STARTED.append(browsers[-1])
    browser_pids = [b.service.process.pid for b in browsers]
    memory = {"browsers_pss_peak": 0, "server_pss_peak": 0}
    sampling = threading.Event()

    def sample():
        while not sampling.is_set():
            memory["browsers_pss_peak"] = max(memory["browsers_pss_peak"], _tree_pss(browser_pids))
            memory["server_pss_peak"] = max(memory["server_pss_peak"], _tree_pss([server.pid]))
            sampling.wait(1.0)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()

    total_answers = args.annotators * (args.tasks_per_annotator + 1)  # one attention check each
    t_start = time.time()
    threads = [threading.Thread(target=b.run, daemon=True) for b in browsers]
    for t in threads:
        t.start()
    for b in browsers:  # every browser at its first task (consent given), then the thread annotators start too
        b.ready.wait(timeout=max(1.0, t_start + 180 - time.time()))
    t_all_in = time.time()
    worker = Worker(db, tokens[k:], args.think, 0, env)
    _STARTED.append(worker.proc)

    def acked() -> int:
        return len(worker.acked) + sum(b.acked for b in browsers)
    # the kill: once a share of the answers is in and every browser has had an answer accepted
    deadline = time.time() + args.timeout
    while not (acked() >= args.kill_at * total_answers and all(b.acked for b in browsers)):
        if time.time() > deadline or worker.proc.poll() is not None:
            break
        time.sleep(0.05)
    drill.down.set()
    t_kill = time.time()
    os.kill(server.pid, signal.SIGKILL)
    if worker.proc.poll() is None:  # (with few thread annotators they may all be done already)
        os.kill(worker.proc.pid, signal.SIGKILL)
    server.wait()
    worker.proc.wait()
    worker.reader.join(timeout=30)  # what it printed in the instant before the kill is acknowledged too
    for b in browsers:
        b.acked_before_kill = b.acked
    killed_worker_acked = list(worker.acked)
    after_kill = StudyStore(db)
    stored = {a.submission_id for a in after_kill.answers(study_id)}
    per_annotator = {}
    for a in after_kill.answers(study_id):
        per_annotator[a.annotator] = per_annotator.get(a.annotator, 0) + 1
    lost_at_kill = sum(1 for s in killed_worker_acked if s not in stored) + sum(
        max(0, b.acked_before_kill - per_annotator.get(b.name, 0)) for b in browsers)
    integrity_at_kill = after_kill.annotations.integrity_check()
    answered_at_kill = len(stored)

    server, _ = start_server(port, env, log)
    _STARTED.append(server)
    time_to_restart = time.time() - t_kill
    drill.restarted_at = time.time()
    browser_pids[:] = [b.service.process.pid for b in browsers]
    drill.generation += 1
    drill.down.clear()
    drill.up.set()
    resumed = Worker(db, tokens[k:], args.think, 1, env)
    _STARTED.append(resumed.proc)
    resumed_code = resumed.finish(timeout=args.timeout)
    for t in threads:
        t.join(timeout=max(1.0, deadline - time.time()))
    wall = time.time() - t_all_in  # from all annotators answering to the last answer
    sampling.set()
    sampler.join(timeout=10)
    for b in browsers:
        b.quit()
    t_stop = time.time()
    server.terminate()  # the browsers have quit: the server must exit on its own (app/serve.py bounds it)
    try:
        server.wait(timeout=STOP_LIMIT_S)
        stopped_on_sigterm = True
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
        stopped_on_sigterm = False
    stop_seconds = time.time() - t_stop
    log.close()

    studies = StudyStore(db)
    facts = invariants(studies, study_id)
    final = studies.answers(study_id)
    stored = {a.submission_id for a in final}
    per_annotator = {}
    for a in final:
        per_annotator[a.annotator] = per_annotator.get(a.annotator, 0) + 1
    unfinished = [n for n in names if per_annotator.get(n, 0) < args.tasks_per_annotator + 1]
    lost = sum(1 for s in killed_worker_acked + resumed.acked if s not in stored) + sum(
        max(0, b.acked - per_annotator.get(b.name, 0)) for b in browsers)
    submits, nexts = worker.submit_ms + resumed.submit_ms, worker.next_ms + resumed.next_ms
    facts.update({
        "study_id": study_id, "annotators": args.annotators, "browsers": k, "thread_annotators": args.annotators - k,
        "browser_flags": " ".join(BROWSER_FLAGS), "answers_expected": total_answers,
        "acknowledged_before_kill": len(killed_worker_acked) + sum(b.acked_before_kill for b in browsers),
        "answered_at_kill": answered_at_kill, "lost_at_kill": lost_at_kill, "integrity_at_kill": integrity_at_kill,
        "killed_mid_study": 0 < answered_at_kill < total_answers,
        "lost": lost, "unfinished": unfinished, "wall_seconds": round(wall, 1),
        "answers_per_second": round(facts["answers"] / wall, 2) if wall > 0 else None,
        "first_start_seconds": round(first_start, 1), "time_to_restart_seconds": round(time_to_restart, 1),
        "stopped_on_sigterm": stopped_on_sigterm, "stop_seconds": round(stop_seconds, 1),
        "browser_first_answer_after_restart_seconds": round(max(
            (b.first_ack_after_restart for b in browsers if b.first_ack_after_restart is not None), default=0.0), 1),
        "browser_reloads": sum(b.reloads for b in browsers),
        "browser_retries": [r for b in browsers for r in b.retries], "browser_answers": sum(b.acked for b in browsers),
        "thread_submit_ms_median": round(statistics.median(submits), 1) if submits else None,
        "thread_submit_ms_p95": _pct(submits, 0.95),
        "thread_next_ms_median": round(statistics.median(nexts), 1) if nexts else None,
        "thread_next_ms_p95": _pct(nexts, 0.95),
        "browsers_pss_peak_mib": round(memory["browsers_pss_peak"] / 2**20),
        "per_browser_pss_peak_mib": round(memory["browsers_pss_peak"] / 2**20 / k) if k else None,
        "server_pss_peak_mib": round(memory["server_pss_peak"] / 2**20),
        "errors": [e for b in browsers for e in b.errors] + resumed.errors + (
            [f"resumed worker exited {resumed_code}"] if resumed_code else []),
    })
    return facts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="a tiny quick run: 6 annotators, 1 in a browser")
    p.add_argument("--annotators", type=int, default=30)
    p.add_argument("--browsers", type=int, default=4, help="annotators in real Chromium sessions (about 0.3 GiB each)")
    p.add_argument("--tasks-per-annotator", type=int, default=4)
    p.add_argument("--overlap", type=int, default=2)
    p.add_argument("--think", type=float, default=2.0, help="mean seconds a thread annotator waits before answering")
    p.add_argument("--kill-at", type=float, default=0.4, help="share of all answers acknowledged before the SIGKILL")
    p.add_argument("--timeout", type=float, default=540.0)
    p.add_argument("--json", default=None, help="also write the figures here")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--db", help=argparse.SUPPRESS)
    p.add_argument("--token", action="append", default=[], help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return _worker(args.db, args.token, args.think, args.seed)
    if args.smoke:
        # one browser: the smoke run checks the drill runs end to end (browser path included), not its figures
        args.annotators, args.browsers, args.tasks_per_annotator, args.think, args.timeout = 6, 1, 2, 1.5, 400.0
    if args.browsers > args.annotators:
        p.error("--browsers cannot exceed --annotators")
    try:
        f = run(args)
    finally:
        for thing in reversed(_STARTED):
            if isinstance(thing, Browser):
                thing.quit()
            elif thing.poll() is None:
                thing.kill()
                thing.wait()
    f["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}
    f["command"] = "python scripts/tools/study_server_drill.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if not f["browsers"]:
        print("note: no chromium/chromedriver here: every annotator answered through the engine path")
    print(f"sessions: {f['annotators']} annotators ({f['browsers']} in headless Chromium, {f['thread_annotators']} "
          f"through StudyStore in threads), {f['tasks']} tasks at overlap {f['overlap']}")
    print(f"answers: {f['answers']} of {f['answers_expected']} in {f['wall_seconds']} s ({f['answers_per_second']}/s), "
          f"{f['browser_answers']} of them in the browsers; thread path submit median {f['thread_submit_ms_median']} ms, "
          f"p95 {f['thread_submit_ms_p95']} ms; next-task median {f['thread_next_ms_median']} ms, p95 {f['thread_next_ms_p95']} ms")
    print(f"SIGKILL after {f['acknowledged_before_kill']} acknowledged answers ({f['answered_at_kill']} stored): "
          f"lost {f['lost_at_kill']}, integrity {f['integrity_at_kill']}; server back in {f['time_to_restart_seconds']} s "
          f"(first start {f['first_start_seconds']} s); browsers reloaded {f['browser_reloads']} times (and retried "
          f"{len(f['browser_retries'])} steps), slowest first "
          f"answer after the restart {f['browser_first_answer_after_restart_seconds']} s")
    print(f"end: answers lost {f['lost']}, tasks at exactly overlap {f['tasks_exact']}/{f['tasks']} (over "
          f"{f['tasks_over']}), items given twice {f['duplicate_items']}, unfinished {len(f['unfinished'])}, "
          f"integrity {f['integrity']}")
    print(f"memory (PSS peak): browsers {f['browsers_pss_peak_mib']} MiB ({f['per_browser_pss_peak_mib']} MiB each), "
          f"server {f['server_pss_peak_mib']} MiB")
    failed = verdict(f)
    f["failed"] = failed
    if args.json:
        Path(args.json).write_text(json.dumps(f, indent=2), encoding="utf-8")
    print("OK" if not failed else "FAILED: " + "; ".join(failed))
    return 0 if not failed else 1


if __name__ == "__main__":
    from engine.settings import offline

    offline()  # an entry point: no hub at run time (engine/settings.py)
    sys.exit(main())
