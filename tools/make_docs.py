"""Build the docs site offline: nbdev's notebook processing, then smalldocs (pure Python) instead of Quarto.

    python tools/make_docs.py          # -> _docs/ (open _docs/index.html)

The steps are nbdev's own docs pipeline without the Quarto call: write nbs/nbdev.yml, rebuild the symbol index,
process the notebooks into _proc/ (frontmatter, show_doc entries for every exported symbol, hidden cells dropped; saved
outputs are what the pages show), then render _proc/ with smalldocs, which reads the same _quarto.yml Quarto does.
On GitHub, .github/workflows/deploy.yaml builds the same site with Quarto."""

import re, shutil, subprocess, sys, tarfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KATEX_VERSION = "0.16.11"  # the version smalldocs links from its CDN
KATEX_CDN = f"https://cdn.jsdelivr.net/npm/katex@{KATEX_VERSION}/dist"
FONT_IMPORT = re.compile(r"@import url\(https://fonts\.googleapis\.com/[^)]*\);?")


def katex_dist() -> Path | None:
    "KaTeX's dist/ folder, fetched once from npm into .cache/ (None when npm cannot be reached)."
    cache = ROOT / ".cache"
    dist = cache / f"katex-{KATEX_VERSION}" / "package" / "dist"
    if dist.is_dir():
        return dist
    cache.mkdir(exist_ok=True)
    r = subprocess.run(["npm", "pack", f"katex@{KATEX_VERSION}", "--silent"], cwd=cache, capture_output=True, text=True)
    tgz = cache / f"katex-{KATEX_VERSION}.tgz"
    if r.returncode or not tgz.is_file():
        return None
    with tarfile.open(tgz) as t:
        t.extractall(cache / f"katex-{KATEX_VERSION}", filter="data")
    return dist if dist.is_dir() else None


def make_offline(site: Path):
    "Serve maths from a local KaTeX and drop the web-font import, so every page works without a network."
    dist = katex_dist()
    if dist is None:
        print("warning: npm unreachable; pages load KaTeX from its CDN (maths needs a network)")
        return
    shutil.copytree(
        dist,
        site / "site_libs" / "katex",
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns("*.mjs", "katex.js", "katex.css", "README.md"),
    )
    for page in site.rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        if KATEX_CDN not in html:
            continue
        depth = len(page.relative_to(site).parts) - 1
        page.write_text(html.replace(KATEX_CDN, "../" * depth + "site_libs/katex"), encoding="utf-8")
    for css in site.rglob("*.css"):
        text = css.read_text(encoding="utf-8")
        if FONT_IMPORT.search(text):
            css.write_text(FONT_IMPORT.sub("", text), encoding="utf-8")


SEARCH_FETCH = 'const r = await fetch(offset + "search.json");\n      index = await r.json();'


def local_search(site: Path):
    """Make search work when the site is opened as files: browsers refuse `fetch` on file:// pages, so the index also
    ships as a script every page loads, and smalldocs' search reads it when present (over http it is the same)."""
    index = (site / "search.json").read_text(encoding="utf-8")
    (site / "search-index.js").write_text(f"window.smalldocsSearchIndex = {index};\n", encoding="utf-8")
    js = site / "site_libs" / "smalldocs.js"
    text = js.read_text(encoding="utf-8")
    if SEARCH_FETCH not in text:
        sys.exit("tools/make_docs.py: smalldocs' search no longer fetches search.json as expected; update local_search")
    use = (
        "if (window.smalldocsSearchIndex) { index = window.smalldocsSearchIndex; } else {\n      " + SEARCH_FETCH + " }"
    )
    js.write_text(text.replace(SEARCH_FETCH, use), encoding="utf-8")
    for page in site.rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        depth = len(page.relative_to(site).parts) - 1
        tag = '<script src="' + "../" * depth + 'site_libs/smalldocs.js" defer>'
        if tag in html:
            extra = '<script src="' + "../" * depth + 'search-index.js" defer></script>\n'
            page.write_text(html.replace(tag, extra + tag), encoding="utf-8")


def main():
    import os

    os.chdir(ROOT)
    from nbdev.config import get_config
    from nbdev.quarto import refresh_quarto_yml
    from nbdev.serve import proc_nbs
    import nbdev.doclinks

    t0 = time.perf_counter()
    cfg = get_config()
    refresh_quarto_yml()
    nbdev.doclinks._build_modidx()
    cache = proc_nbs(str(cfg.nbs_path), n_workers=2)
    t1 = time.perf_counter()
    r = subprocess.run(
        [str(Path(sys.executable).parent / "smalldocs"), "render", str(cache)], capture_output=True, text=True
    )
    noise = ("format-links", "commonmark", "keep-md")
    for line in (r.stdout + r.stderr).splitlines():
        if line.strip() and not any(n in line for n in noise):
            print(line)
    if r.returncode:
        sys.exit(f"smalldocs failed (exit {r.returncode})")
    out = ROOT / cfg.doc_path.name
    shutil.rmtree(out, ignore_errors=True)
    shutil.move(str(cache / cfg.doc_path.name), str(out))
    make_offline(out)
    local_search(out)
    pages = sorted(p.name for p in out.glob("*.html"))
    print(
        f"docs: {len(pages)} pages in {out.relative_to(ROOT)}/ (processing "
        f"{t1 - t0:.1f} s, rendering {time.perf_counter() - t1:.1f} s); open {out.relative_to(ROOT)}/index.html "
        "in a browser (search works from the files), or serve it: python -m http.server -d _docs 8000"
    )


if __name__ == "__main__":
    main()
