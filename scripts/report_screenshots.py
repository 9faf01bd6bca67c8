"""Retake the README's and docs/report.md's pictures of the corpus report in headless Chromium.

Run after `bash scripts/main.sh` (it writes out/report/report.html); look at the pictures before
committing them:

    python scripts/report_screenshots.py [out/report/report.html] [--out docs/report]

Writes report-top.png (the page's top), report-by-library.png (the first dimension's section, with
its per-library table) and report-methods.png (the Methods paragraph), 1280 pixels wide.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

SHOTS = {
    "report-top.png": (None, 1500),
    "report-by-library.png": ("dim-symptom", 1800),
    "report-methods.png": ("methods", 1800),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", nargs="?", default="out/report/report.html")
    ap.add_argument("--out", default="docs/report")
    a = ap.parse_args()
    page = Path(a.report).resolve()
    if not page.exists():
        print(f"{page}: no report here; run bash scripts/main.sh first", file=sys.stderr)
        return 2
    from PIL import Image
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    o = webdriver.ChromeOptions()
    o.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"):
        o.add_argument(arg)
    d = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=o)
    try:
        d.set_window_size(1280, 1000)
        d.get(page.as_uri())
        height = int(d.execute_script("return document.body.scrollHeight")) + 40
        d.set_window_size(1280, height)
        with tempfile.TemporaryDirectory() as tmp:
            full = Path(tmp) / "full.png"
            d.save_screenshot(str(full))
            img = Image.open(full)
            out = Path(a.out)
            out.mkdir(parents=True, exist_ok=True)
            for name, (anchor, h) in SHOTS.items():
                top = (
                    0
                    if anchor is None
                    else int(d.execute_script(f"return document.getElementById('{anchor}').offsetTop"))
                )
                top = max(0, top - 20)
                img.crop((0, top, 1280, min(top + h, img.height))).convert("RGB").save(out / name)
                print(f"wrote {out / name}")
    finally:
        d.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
