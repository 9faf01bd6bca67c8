"""The HTML report in headless Chromium: it renders, links work, issue text cannot run script, and
every category shows. Saves a screenshot (look at it: tests/…/report.png). Skipped only when
CLASSIFY_SKIP_BROWSER=1."""

import json
import os
import shutil

import pytest
from conftest import ROOT, write_jsonl
from typer.testing import CliRunner

from classify.cli.main import app
from classify.core.taxonomy import load_taxonomy
from classify.report.html import category_names

pytestmark = pytest.mark.skipif(os.environ.get("CLASSIFY_SKIP_BROWSER") == "1", reason="CLASSIFY_SKIP_BROWSER=1")
EVIL = '<script>document.title="pwned"</script><img src=x onerror="document.title=\'pwned\'">'


@pytest.fixture(scope="module")
def driver():
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    binary = shutil.which("chromium") or "/usr/bin/chromium"
    chromedriver = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    if not (os.path.exists(binary) and os.path.exists(chromedriver)):
        pytest.fail("headless Chromium is missing: apt-get install -y chromium chromium-driver")
    o = webdriver.ChromeOptions()
    o.binary_location = binary
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,2000"):
        o.add_argument(a)
    d = webdriver.Chrome(service=Service(chromedriver), options=o)
    yield d
    d.quit()


def test_report_in_a_browser(driver, tmp_path, shared_cache):
    from selenium.webdriver.common.by import By

    rows = [json.loads(x) for x in (ROOT / "data" / "issues.jsonl").read_text(encoding="utf-8").splitlines()][:40]
    rows[0]["title"] = EVIL  # issue text is untrusted
    inp = write_jsonl(tmp_path / "in.jsonl", rows)
    labels = tmp_path / "labels.jsonl"
    r = CliRunner().invoke(
        app,
        [
            "run",
            "--model",
            "tfidf-logreg",
            "--screen",
            "--screen-model",
            "tfidf-logreg",
            "-i",
            str(inp),
            "-o",
            str(labels),
        ],
    )
    assert r.exit_code == 0, r.output
    rep = tmp_path / "rep"
    ref = ROOT / "references" / "seed-study.yaml"
    r = CliRunner().invoke(
        app,
        ["report", str(labels), "-i", str(inp), "--out-dir", str(rep), "--reference", str(ref), "--bootstrap", "200"],
    )
    assert r.exit_code == 0, r.output

    driver.get((rep / "report.html").as_uri())
    driver.set_window_size(1280, driver.execute_script("return document.body.scrollHeight") + 40)
    shot = tmp_path / "report.png"
    driver.save_screenshot(str(shot))
    assert shot.stat().st_size > 50_000
    print(f"screenshot: {shot}")

    assert driver.title.startswith("Corpus report") and "pwned" not in driver.title
    assert driver.find_elements(By.TAG_NAME, "script") == []
    assert EVIL.split(">")[0] + ">" not in driver.page_source or "&lt;script" in driver.page_source
    # every details block open, so example links are in the layout
    driver.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")
    links = [a.get_attribute("href") for a in driver.find_elements(By.CSS_SELECTOR, "a[href]")]
    here = driver.current_url.split("#")[0]
    assert links and all(h.startswith("https://github.com/") or h.startswith(here + "#") for h in links)
    text = driver.find_element(By.TAG_NAME, "body").text
    names = category_names(load_taxonomy())
    for dim in ("symptom", "root_cause", "root_cause_group"):
        for cid, name in names[dim].items():
            if cid != "none_shown":
                assert name in text, f"{dim} category {name} missing"
    for needle in ("Published shares beside ours", "27.3%", "Screened out", "tfidf-logreg", "gpu-kernel-issues@1"):
        assert needle in text
    # screened counts, like-for-like comparison in words, counts per library, a Methods paragraph
    for needle in ("screened out as not failure reports", "What this comparison can tell", "what it tells", "Methods"):
        assert needle in text, needle
    methods = driver.find_element(By.CSS_SELECTOR, "p.methods").text  # technical names belong there
    assert "95%" in methods and "assume" in methods
    plain = text.replace(methods, "")
    assert "inside?" not in plain and "EMQ" not in plain and "TV" not in plain.split()
    bylib = driver.find_element(By.CSS_SELECTOR, "table.bylib").text
    assert "n = " in bylib
    # the 15-column cross table fits its box (no horizontal scrolling inside the page)
    assert driver.execute_script(
        "const t = document.querySelector('table.crosstab');"
        "return t.getBoundingClientRect().right <= t.parentElement.getBoundingClientRect().right + 1"
    )
    # figures have real titles (not file names) and are not cut off
    for img in driver.find_elements(By.CSS_SELECTOR, "figure img"):
        assert not img.get_attribute("alt").endswith(".png")
        assert driver.execute_script(
            "return arguments[0].naturalWidth > 0 && arguments[0].getBoundingClientRect().right <= window.innerWidth",
            img,
        )
    # nothing wider than the page
    assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth + 1")
