"""End to end in a real browser (Debian's headless Chromium through Selenium): two coders code
five items with the keyboard, the agreement page shows the kappa computed here by hand (with the
cause-shown row and the small-sample warning), one disagreement (on an item whose id needs
escaping in a URL) is adjudicated, a review queue item is decided, and the export validates as gold.
A screenshot of each view goes to $CLASSIFY_SCREENSHOT_DIR (default: <tmp>/classify-workbench-screens).

Runs wherever Chromium is installed (`.ci/run` installs it); set CLASSIFY_SKIP_BROWSER=1 to skip.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner
from wb_helpers import EVIL_TITLE, serving, write_input

from classify.cli.main import app as cli
from classify.workbench.adjudicate import export
from classify.workbench.project import Project
from classify.workbench.reviewtask import ReviewTask

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"

pytestmark = pytest.mark.skipif(os.environ.get("CLASSIFY_SKIP_BROWSER") == "1", reason="CLASSIFY_SKIP_BROWSER=1")

SCREENS = Path(os.environ.get("CLASSIFY_SCREENSHOT_DIR") or Path(tempfile.gettempdir()) / "classify-workbench-screens")


@pytest.fixture(scope="module")
def browser():
    # no silent skip: a CI without the browser fails here and says how to get it
    missing = [p for p in (CHROMIUM, DRIVER) if not shutil.which(p)]
    assert not missing, f"{missing} not found: apt-get install -y chromium chromium-driver (or CLASSIFY_SKIP_BROWSER=1)"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1440,1000", "--disable-gpu"):
        opts.add_argument(a)
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


def _wait(cond, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        try:
            got = cond()
        except Exception:  # the page is still loading: element not there yet
            got = None
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {cond}")


def _keys(driver, *keys):
    from selenium.webdriver.common.action_chains import ActionChains

    for k in keys:
        ActionChains(driver).send_keys(k).perform()


def _shot(driver, name):
    SCREENS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SCREENS / f"{name}.png"))


def _login(driver, url, coder):
    from selenium.webdriver.common.by import By

    driver.delete_all_cookies()
    driver.get(url + "/")
    _wait(lambda: driver.find_element(By.ID, f"pick-{coder}")).click()
    _wait(lambda: driver.find_element(By.ID, "coder-name").text == coder)


def _code(driver, url, digits_per_item, shots=False):
    """Code every open item with the keyboard: per item the key strokes for each dimension, then Enter."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    for n, strokes in enumerate(digits_per_item):
        item = _wait(lambda: json.loads(driver.find_element(By.ID, "wb-state").get_attribute("textContent"))["item"])
        if n == 0:
            _keys(driver, "5", "u")  # a wrong pick, undone
            assert driver.find_element(By.ID, "pick-symptom").text == "–"
        _keys(driver, *strokes)
        if shots and n == 0:
            _keys(driver, "!")
            _shot(driver, "coding")
            _keys(driver, "?")
            # the key column of the help holds "1…9" on one line
            first, last = driver.find_element(By.CSS_SELECTOR, "#help td").find_elements(By.TAG_NAME, "kbd")
            assert first.location["y"] == last.location["y"], (first.location, last.location)
            _shot(driver, "help")
            _keys(driver, Keys.ESCAPE, "!")
        _keys(driver, Keys.ENTER)
        _wait(
            lambda item=item: (
                driver.find_elements(By.ID, "all-done")
                or json.loads(driver.find_element(By.ID, "wb-state").get_attribute("textContent"))["item"] != item
            )
        )
    assert driver.find_elements(By.ID, "all-done")


def test_two_coders_agreement_adjudication_review_export(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    driver = browser
    inp = write_input(tmp_path / "in.jsonl")
    rows = [json.loads(x) for x in inp.read_text().splitlines()]
    odd_id = "org/repo#7?q=1/../x"  # ?, # and /.. : one path segment in every link and form action
    rows[1]["id"] = odd_id
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    project = Project.create(tmp_path / "proj", inp, ["a", "b"])
    sym = project.taxonomy.dimensions["symptom"].ids
    rc = project.taxonomy.dimensions["root_cause"].ids
    key = {c: str(i + 1) for i, c in enumerate(sym)}
    # symptoms and root causes (None: "not shown", key 0); the root cause has 15 categories, so 12 is two keys
    a_sym = ["crash", "crash", "hang", "build_failure", "crash"]
    b_sym = ["crash", "hang", "hang", "build_failure", "crash"]
    a_rc = [rc[11], rc[0], None, None, None]
    b_rc = [rc[11], rc[1], None, None, None]

    def strokes(s, r):
        return [key[x] for x in s], [list(str(rc.index(y) + 1)) if y else ["0"] for y in r]

    with serving(project) as url:
        driver.get(url + "/")
        _shot(driver, "login")
        for coder, s, r in (("a", a_sym, a_rc), ("b", b_sym, b_rc)):
            _login(driver, url, coder)
            ss, rr = strokes(s, r)
            if coder == "a":  # the first item shows its hostile title as text, and ran none of it
                assert driver.find_element(By.ID, "issue-title").text == EVIL_TITLE
                assert driver.execute_script("return window.__pwned === undefined")
            _code(driver, url, [[x, *y] for x, y in zip(ss, rr)], shots=coder == "a")
        for st in project.states():
            assert {c: st.codes[c].labels["symptom"] for c in "ab"} == {
                "a": a_sym[st.pos],
                "b": b_sym[st.pos],
            }
        assert project.states()[0].codes["a"].labels["root_cause"] == rc[11]

        # agreement: kappa computed here by hand, po and pe over the five items
        def kappa(x, y):
            n = len(x)
            po = sum(i == j for i, j in zip(x, y)) / n
            pe = sum((x.count(c) / n) * (y.count(c) / n) for c in set(x) | set(y))
            return (po - pe) / (1 - pe)

        driver.get(url + "/agreement")
        cell = _wait(lambda: driver.find_element(By.CSS_SELECTOR, 'tr[data-pair="a|b"][data-dim="symptom"] td.kappa'))
        assert cell.text == f"{kappa(a_sym, b_sym):.3f}"
        cell = driver.find_element(By.CSS_SELECTOR, 'tr[data-pair="a|b"][data-dim="root_cause"] td.kappa')
        assert cell.text == f"{kappa(a_rc[:2], b_rc[:2]):.3f}"  # null ("not shown") is no category
        shown = driver.find_element(By.CSS_SELECTOR, 'tr[data-pair="a|b"][data-dim="root_cause_shown"] td.kappa')
        assert shown.text == "1.000"  # both said "not shown" on the same three items
        assert "Small sample" in driver.find_element(By.ID, "small-warning").text
        _shot(driver, "agreement")

        # adjudicate the one disagreement (item 2: crash vs hang, and its root cause)
        driver.get(url + "/adjudicate")
        links = driver.find_elements(By.CSS_SELECTOR, "#disagreements a.button")
        assert len(links) == 1
        _shot(driver, "adjudicate-list")
        links[0].click()
        Select(_wait(lambda: driver.find_element(By.ID, "label_symptom"))).select_by_value("hang")
        Select(driver.find_element(By.ID, "label_root_cause")).select_by_value(rc[1])
        driver.find_element(By.ID, "adj-note").send_keys("the process stops responding; nothing crashes")
        driver.find_element(By.CSS_SELECTOR, "details summary").click()
        Select(driver.find_element(By.ID, "proposal_category")).select_by_value("symptom.hang")
        driver.find_element(By.ID, "proposal_text").send_keys("a call that never returns, no error")
        _shot(driver, "adjudication")
        driver.find_element(By.ID, "decide").click()
        _wait(lambda: driver.find_element(By.ID, "decided"))
        assert driver.find_element(By.ID, "issue-title").text == rows[1]["title"]
        _shot(driver, "adjudicated")
        assert project.state(odd_id).decision is not None

    out = tmp_path / "gold.jsonl"
    res = export(project, out)
    assert res.n == 5 and res.adjudicated == 1 and res.queue is not None
    r = CliRunner().invoke(cli, ["gold", "validate", "--gold", str(out)])
    assert r.exit_code == 0 and "ok: 5 records" in r.output, r.output
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert rows[1]["symptom"] == "hang" and rows[1]["coder_a"]["symptom"] == "crash"

    # the review queue as a task: a decision in the page lands in the review loop's decisions file
    review = ReviewTask(project, res.queue)
    before = res.queue.with_name("decisions.jsonl").read_text().count("\n")
    with serving(project, review=review) as url:
        _login(driver, url, "a")
        driver.get(url + "/review/1")
        Select(_wait(lambda: driver.find_element(By.ID, "review-action"))).select_by_value("ambiguous")
        _shot(driver, "review")
        driver.find_element(By.ID, "review-save").click()
        _wait(lambda: driver.find_element(By.ID, "review-decided"))
    lines = res.queue.with_name("decisions.jsonl").read_text().splitlines()
    assert len(lines) == before + 1 and json.loads(lines[-1])["action"] == "ambiguous"
    project.close()
