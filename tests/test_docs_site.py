"""The documentation site: a short README, no broken relative links, `mkdocs build --strict`, and no
page that shows raw reST or Markdown markup instead of rendering it."""

import importlib.util
import os
import re
import subprocess
import sys

import pytest

from conftest import REPO

README = REPO / "README.md"
PAGES = sorted((REPO / "docs").glob("*.md"))

# [text](target) and ![alt](target); the target ends at whitespace (an optional "title") or ")".
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def relative_links(path):
    """The relative link targets of a markdown file, without #fragments (code blocks and spans skipped)."""
    text = CODE_SPAN.sub("", FENCE.sub("", path.read_text()))
    for target in LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            continue  # http(s), mailto and the like; an anchor in the same page
        yield target.split("#", 1)[0]


def test_readme_is_short_and_has_the_two_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= 250, "README.md is the five-minute page: move details to docs/"
    assert "make demo" in text
    assert "make test" in text


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_point_to_existing_files(path):
    missing = [t for t in relative_links(path) if not (path.parent / t).exists()]
    assert not missing, f"{path.relative_to(REPO)} links to missing files: {missing}"


def test_link_scanner_sees_links():
    links = list(relative_links(README))
    assert "docs/findings.md" in links and "docs/figures/figure1_paper_phenomena.png" in links


def test_mkdocs_build_strict(tmp_path):
    needed = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")
    absent = [name for name in needed if importlib.util.find_spec(name.split(".")[0]) is None
              or importlib.util.find_spec(name) is None]
    if absent:
        pytest.skip(f"the docs extra is not installed ({', '.join(absent)} missing): pip install -e '.[docs]'")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "index.html").exists()
    assert (tmp_path / "site" / "api" / "index.html").exists()
    raw = {page.relative_to(tmp_path / "site").as_posix(): found
           for page in sorted((tmp_path / "site").rglob("*.html")) if (found := raw_markers(page.read_text()))}
    assert not raw, f"pages that show markup instead of rendering it: {raw}"


RAW_MARKERS = re.compile(r":param |:returns?:|:(?:class|func|meth|mod|attr|obj|ref):|\*\*\w|\w\*\*|\]\(")
"""reST fields and roles, Markdown bold and links: in a page's visible text (code
blocks aside) they are markup that was not rendered, such as a docstring in a format the API
reference does not parse."""


def raw_markers(page_html: str) -> list[str]:
    """The raw markers in the visible text of a built page: tags, scripts, styles and code removed."""
    import html

    text = re.sub(r"<(pre|code|script|style)\b[^>]*>.*?</\1>", " ", page_html, flags=re.S)
    text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    return [text[max(0, m.start() - 40): m.end() + 20].strip() for m in RAW_MARKERS.finditer(text)][:5]


def test_the_raw_marker_scan_sees_unrendered_markup():
    assert raw_markers("<p>Run it with :func:`coocflow.run` and :param x: the width</p>")
    assert raw_markers("<p>see [the guide](guide.md) and **this**</p>")
    assert not raw_markers("<p>rendered <code>``x``</code> <strong>bold</strong></p><pre>f(**kw)</pre>")
