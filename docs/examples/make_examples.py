"""Render an example review and check run as GitHub would show them, for docs/: `python docs/examples/make_examples.py`.

The texts come from the app's own builders (anchoring, render, the check run's view) fed with a made-up answer; the
Markdown is rendered with cmark-gfm (GitHub's flavour, `pip install cmarkgfm`) and screenshotted with headless
Chromium (`apt-get install chromium`) when it is installed; otherwise only the HTML files are written.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import cmarkgfm
from cmarkgfm.cmark import Options

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from reviewer_app.core.anchoring import anchor  # noqa: E402
from reviewer_app.core.diff import parse_patch  # noqa: E402
from reviewer_app.core.job_records import CheckReport  # noqa: E402
from reviewer_app.core.markers import make_marker  # noqa: E402
from reviewer_app.core.review_model import ModelComment, ReviewCounts  # noqa: E402
from reviewer_app.github.check_run_text import check_reviewed, conclusion_for  # noqa: E402
from reviewer_app.review.render import (  # noqa: E402
    Links,
    group_by_reason,
    inline_comment,
    not_reviewed_line,
    render_review_body,
    top_findings,
)

HERE = Path(__file__).resolve().parent
SHA = "3f1c2a9b7d4e5f60718293a4b5c6d7e8f9012345"
PR = "https://github.com/octo-org/widgets/pull/42"
PATCH = """@@ -10,8 +10,9 @@ def fetch(url, retries=3):
     attempt = 0
-    while attempt < retries:
+    while True:
         try:
             return session.get(url, timeout=None)
         except ConnectionError:
             attempt += 1
-            time.sleep(2 ** attempt)
+            time.sleep(1)
+    log.info("gave up on %s", url)
     return None"""
ANSWER = [
    ModelComment(
        "src/client.py",
        11,
        "The loop no longer stops: `retries` is never checked, so an unreachable host spins forever.",
        severity="critical",
        suggestion="    while attempt < retries:",
    ),
    ModelComment(
        "src/client.py",
        16,
        "Dropping the exponential back-off makes every client retry once a second "
        "against a host that is already struggling.",
        side="LEFT",
        severity="warning",
    ),
    ModelComment(
        "src/client.py",
        13,
        "`timeout=None` waits forever on a stalled socket; pass the client's timeout.",
        severity="warning",
        suggestion="            return session.get(url, timeout=self.timeout)",
    ),
    ModelComment(
        "src/jobs.py",
        88,
        "`sync_all()` relies on `fetch()` returning `None` after the last retry; with the "
        "unbounded loop that branch is dead.",
        severity="suggestion",
    ),
]
NOT_COVERED = [
    *((f"legacy/old_{i}.py", "deleted") for i in range(6)),
    ("poetry.lock", "lock file"),
    ("src/_version.py", "generated (its header says so)"),
]
SUMMARY = (
    "The retry loop in `fetch()` lost its bound and its back-off: the main risk is a worker that never "
    "returns on a dead host. Check the callers in `src/jobs.py` that count on `None` after the last retry."
)

CSS = """
body { font-family: -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif; font-size: 14px;
       line-height: 1.5; color: #1f2328; background: #f6f8fa; margin: 0; padding: 24px; width: 860px; }
.box { background: #fff; border: 1px solid #d1d9e0; border-radius: 6px; margin-bottom: 16px; }
.head { background: #f6f8fa; border-bottom: 1px solid #d1d9e0; padding: 8px 16px; border-radius: 6px 6px 0 0;
        font-size: 13px; color: #59636e; }
.head b { color: #1f2328; }
.md { padding: 16px; }
.md h3 { font-size: 1.25em; border-bottom: 1px solid #d1d9e0; padding-bottom: .3em; margin: 24px 0 16px; }
.md code { background: #818b981f; border-radius: 6px; padding: .2em .4em; font-size: 85%;
           font-family: ui-monospace, SFMono-Regular, Menlo, monospace; }
.md pre { background: #f6f8fa; border-radius: 6px; padding: 16px; overflow: auto; }
.md pre code { background: none; padding: 0; }
.md a { color: #0969da; text-decoration: none; }
.md details summary { cursor: pointer; }
.md ul { padding-left: 2em; }
.md sub { color: #59636e; }
.where { font-family: ui-monospace, Menlo, monospace; font-size: 12px; color: #59636e; padding: 8px 16px 0; }
.sugg { border: 1px solid #d1d9e0; border-radius: 6px; margin: 8px 0; }
.sugg .title { background: #f6f8fa; padding: 4px 8px; font-size: 12px; color: #59636e; }
.sugg pre { margin: 0; border-radius: 0; background: #dafbe1; }
.pill { display: inline-block; padding: 0 8px; border-radius: 2em; font-size: 12px; font-weight: 600;
        border: 1px solid #d1d9e0; background: #fff; }
"""


def md(text: str) -> str:
    # GitHub renders suggestion blocks as a "Suggested change" box; cmark-gfm shows them as code with that info string.
    html = cmarkgfm.github_flavored_markdown_to_html(text, options=Options.CMARK_OPT_UNSAFE)
    return (
        html.replace(
            '<pre lang="suggestion">', '<div class="sugg"><div class="title">Suggested change</div><pre>'
        ).replace("</code></pre>\n", "</code></pre>\n</div>\n")
        if 'lang="suggestion"' in html
        else html
    )


def page(title: str, inner: str) -> str:
    return f"<!doctype html><meta charset=utf-8><title>{title}</title><style>{CSS}</style>{inner}"


def main() -> None:
    diffs = {"src/client.py": parse_patch("src/client.py", PATCH)}
    anchored = anchor(ANSWER, diffs)
    counts = ReviewCounts(
        files_reviewed=2,
        inline=len(anchored.inline),
        moved=len(anchored.moved),
        not_covered=len(NOT_COVERED),
        critical=1,
        warning=2,
        suggestion=1,
    )
    links = Links(PR, SHA)
    body = render_review_body(
        summary=SUMMARY,
        inline=anchored.inline,
        moved_comments=anchored.moved,
        nits=[],
        not_covered=NOT_COVERED,
        incremental_note=None,
        marker=make_marker(1234, SHA),
        counts=counts,
        links=links,
    )
    comments = [inline_comment(c) for c in anchored.inline]
    report = CheckReport(
        summary=SUMMARY,
        top=tuple(f.entry for f in top_findings(anchored.inline, anchored.moved, links)),
        review_url=f"{PR}#pullrequestreview-2468",
        not_reviewed=not_reviewed_line(group_by_reason(NOT_COVERED)),
    )
    title, summary = check_reviewed(counts, head_sha=SHA, report=report)
    conclusion = conclusion_for(counts)

    threads = "".join(
        f'<div class="box"><div class="where">{c["path"]} line {c.get("start_line") or c["line"]}'
        f'{"–" + str(c["line"]) if c.get("start_line") else ""} ({c["side"]})</div><div class="md">{md(str(c["body"]))}</div></div>'
        for c in comments
    )
    review_html = page(
        "Example review",
        (
            '<div class="box"><div class="head"><b>reviewer-app</b> bot reviewed</div>'
            f'<div class="md">{md(body)}</div></div>{threads}'
        ),
    )
    check_html = page(
        "Example check run",
        (
            f'<div class="box"><div class="head"><b>reviewer-app</b> · <span class="pill">{conclusion}</span></div>'
            f'<div class="md"><h2>{title}</h2>{md(summary)}</div></div>'
        ),
    )
    (HERE / "review.md").write_text(body + "\n\n" + "\n\n---\n\n".join(str(c["body"]) for c in comments) + "\n")
    for name, text in (("review", review_html), ("check-run", check_html)):
        (HERE / f"{name}.html").write_text(text)
        shoot(HERE / f"{name}.html", HERE / f"{name}.png", {"review": 1300, "check-run": 760}[name])


def shoot(source: Path, target: Path, height: int) -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print(f"no Chromium: wrote {source.name} only")
        return
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--screenshot={target}",
            f"--window-size=910,{height}",
            source.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    print(f"wrote {target.name}")


if __name__ == "__main__":
    main()
