"""The docs site, built offline the way `make docs` builds it: a page for every notebook, every page opens in headless
Chromium without console errors, every image loads, every internal link resolves, every exported symbol is
documented."""

import html, importlib, re, subprocess, sys
from pathlib import Path
from urllib.parse import unquote, urlparse
import pytest

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "_docs"
from conftest import CHROMIUM, CHROMIUM_MISSING


@pytest.fixture(scope="module")
def site(request):
    """The site, built once per test run: under pytest-xdist the workers take a lock, and the first builds it (into
    the repository's _proc/ and _docs/, as `make docs` does) while the other waits and then reads it."""
    import fcntl

    run = getattr(request.config, "workerinput", {}).get("testrunuid", "")
    built = ROOT / ".docs-built-by"
    with open(ROOT / ".docs-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not run or not built.is_file() or built.read_text() != run:
            r = subprocess.run(
                [sys.executable, str(ROOT / "tools" / "make_docs.py")], cwd=ROOT, capture_output=True, text=True
            )
            assert r.returncode == 0, r.stdout + r.stderr
            assert "broken link" not in r.stdout + r.stderr, r.stdout + r.stderr
            built.write_text(run)
    return SITE


def _pages(site):
    return sorted(site.glob("*.html"))


def test_every_notebook_has_a_page(site):
    for nb in sorted((ROOT / "nbs").glob("*.ipynb")):
        assert (site / f"{nb.stem}.html").is_file(), f"no page for {nb.name}"
    assert (site / "search.json").is_file()


def test_internal_links_and_assets_resolve(site):
    ref = re.compile(r'(?:href|src)="([^"]+)"')
    ids = {}
    bad = []
    for page in _pages(site):
        text = page.read_text(encoding="utf-8")
        for url in map(html.unescape, ref.findall(text)):
            u = urlparse(url)
            if u.scheme or url.startswith("//") or url.startswith("mailto:"):
                continue
            target = page if not u.path else (page.parent / unquote(u.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                bad.append(f"{page.name}: {url}")
                continue
            if u.fragment and target.suffix == ".html":
                if target not in ids:
                    ids[target] = set(re.findall(r'id="([^"]+)"', target.read_text(encoding="utf-8")))
                if unquote(u.fragment) not in ids[target]:
                    bad.append(f"{page.name}: {url} (no such anchor)")
    assert not bad, "\n".join(bad[:30])


def _module_pages():
    "module name -> its notebook's page, from the generated files' 'File to edit' line."
    out = {}
    pkg = ROOT / "mdlm_kit"
    for py in sorted(pkg.rglob("*.py")):
        m = re.search(r"File to edit: (?:\.\./)+nbs/(\S+)\.ipynb", py.read_text(encoding="utf-8"))
        if m:
            out[".".join(py.relative_to(pkg).with_suffix("").parts)] = m.group(1)
    return out


def test_every_exported_symbol_is_documented(site):
    missing = []
    for mod, nb in _module_pages().items():
        text = (site / f"{nb}.html").read_text(encoding="utf-8")
        heads = set(re.findall(r"<h[2-4][^>]*>\s*(?:<[^>]+>)*\s*([A-Za-z_][A-Za-z0-9_.]*)", text))
        for name in importlib.import_module(f"mdlm_kit.{mod}").__all__:
            obj = getattr(importlib.import_module(f"mdlm_kit.{mod}"), name)
            if callable(obj) and not isinstance(obj, (tuple, dict, str)):
                if name not in heads:
                    missing.append(f"{nb}: {name} has no API entry")
            elif name not in html.unescape(re.sub(r"<[^>]+>", "", text)):
                missing.append(f"{nb}: constant {name} is never shown")
    assert not missing, "\n".join(missing)


def test_pages_open_in_chromium_without_errors_and_images_load(site):
    if not Path(CHROMIUM).exists():
        pytest.fail(CHROMIUM_MISSING)
    from playwright.sync_api import sync_playwright

    problems = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
        )
        page = browser.new_page()
        for f in _pages(site):
            errors = []
            page.on("console", lambda m, e=errors: e.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda x, e=errors: e.append(str(x)))
            page.on("requestfailed", lambda r, e=errors: e.append(f"failed to load {r.url}"))
            page.goto(f.as_uri(), wait_until="load")
            page.wait_for_timeout(150)
            broken = page.evaluate(
                "Array.from(document.images).filter(i => !i.complete "
                "|| i.naturalWidth === 0).map(i => i.src.slice(0, 80))"
            )
            n_img = page.evaluate("document.images.length")
            if errors:
                problems.append(f"{f.name}: {errors[:3]}")
            if broken:
                problems.append(f"{f.name}: {len(broken)} of {n_img} images do not load: {broken[:2]}")
            page.close()
            page = browser.new_page()
        browser.close()
    assert not problems, "\n".join(problems)


def test_figures_are_on_the_pages(site):
    "Saved outputs are what the pages show: the lessons with pictures have them."
    for nb in ("07_diffusion", "23_widgets", "22_measure_drafters"):
        assert "<img" in (site / f"{nb}.html").read_text(encoding="utf-8"), (
            f"{nb} shows no figure (run tools/run_nbs.py)"
        )


def test_search_finds_pages_when_the_site_is_opened_as_files(site):
    """`make docs` says to open _docs/index.html; browsers refuse fetch() on file:// pages, so the index ships as a
    script."""
    if not Path(CHROMIUM).exists():
        pytest.fail(CHROMIUM_MISSING)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.goto((site / "07_diffusion.html").as_uri(), wait_until="load")
        box = page.locator(".smalldocs-search input").first
        if not box.is_visible():  # an overlay search opens from its icon
            page.keyboard.press("/")
        box.fill("speculative")
        page.wait_for_function("document.querySelectorAll('.search-result, .search-none').length > 0", timeout=10_000)
        titles = page.locator(".search-result .search-result-title").all_inner_texts()
        browser.close()
    assert titles, "search shows 'No results' for a word on many pages"
    assert any("peculative" in t for t in titles), titles
