"""core/learnings.py: a learning's validation, its path glob, which learnings a review uses, and the pure rule that
withholds a finding a do-not-flag learning covers."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

import pytest

from reviewer_app.core.learnings import (
    MAX_TEXT,
    Learning,
    covering,
    covers,
    drawn_from,
    finding_key,
    glob_in,
    make_draft,
    path_matches,
    preview_text,
    prompt_line,
    relevant,
    subject_of,
    withheld_by,
)
from reviewer_app.core.precision import TEAM_LEARNING, withhold_covered
from reviewer_app.core.review_model import ModelComment

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def draft(**fields):
    base = {"repo": "7", "text": "Do not flag missing docstrings.", "source_kind": "command", "author": "alice"}
    return make_draft(**{**base, "created_at": T0, **fields})


def learning(id: int, text: str, *, glob: str | None = None, kind: str = "do-not-flag", **more) -> Learning:
    d = draft(text=text, path_glob=glob, kind=kind)
    return Learning(id=id, **{**d.__dict__, **more})


def test_a_draft_is_cleaned_and_keeps_its_fields() -> None:
    d = draft(repo=42, text="  Prefer   early returns.  ", kind="prefer", path_glob=" src/** ", source_url=None)
    assert (d.repo, d.text, d.kind, d.path_glob) == ("42", "Prefer early returns.", "prefer", "src/**")
    assert draft(path_glob="").path_glob is None
    assert draft().kind == "do-not-flag"


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"text": "two\nlines"}, "one line"),
        ({"text": "x" * (MAX_TEXT + 1)}, "at most 300"),
        ({"text": "ok"}, "needs a sentence"),
        ({"kind": "ignore"}, "is not one of"),
        ({"source_kind": "email"}, "is not one of"),
        ({"repo": "owner/name"}, "GitHub repository id"),
        ({"path_glob": "//etc/passwd"}, "not a repository path glob"),  # one leading "/" only anchors a glob
        ({"path_glob": "src/../secrets"}, "not a repository path glob"),
        ({"path_glob": "src/$(rm)"}, "not a repository path glob"),
        ({"author": " "}, "login"),
        ({"source_url": "javascript:alert(1)"}, "http"),
        ({"created_at": datetime(2026, 1, 1)}, "timezone"),
    ],
)
def test_a_bad_draft_is_refused_with_a_one_line_reason(fields, reason) -> None:
    with pytest.raises(ValueError, match=reason) as refused:
        draft(**fields)
    assert "\n" not in str(refused.value)


def test_a_setting_may_lower_the_length_bound() -> None:
    with pytest.raises(ValueError, match="at most 20"):
        draft(text="Do not flag missing docstrings.", max_text=20)


@pytest.mark.parametrize(
    ("glob", "path", "matches"),
    [
        (None, "anything/at/all.py", True),
        ("src/legacy/**", "src/legacy/a/b.py", True),
        ("src/legacy/**", "src/legacy.py", False),
        ("src/legacy/", "src/legacy/x.py", True),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/a/b.py", False),
        ("*.sql", "db/migrations/0001.sql", True),
        ("*.sql", "db/sql.py", False),
        ("**/test_*.py", "test_a.py", True),
        ("**/test_*.py", "tests/unit/test_a.py", True),
        ("src/{api,web}/*.py", "src/web/x.py", True),
        ("src/{api,web}/*.py", "src/core/x.py", False),
        ("file?.c", "lib/file1.c", True),
        ("[!a]*.c", "b.c", True),
        ("[!a]*.c", "a.c", False),
    ],
)
def test_path_globs(glob, path, matches) -> None:
    assert path_matches(glob, path) is matches


def test_relevant_learnings_match_the_paths_path_bound_first_then_recently_applied_within_the_bound() -> None:
    repo_wide_old = learning(1, "Prefer early returns.", kind="prefer")
    repo_wide_used = learning(2, "Always check error codes.", kind="always-check", last_applied=T0)
    legacy = learning(3, "Do not flag globals in legacy code.", glob="src/legacy/**")
    docs = learning(4, "Do not flag wording in docs.", glob="docs/**")
    chosen = relevant([repo_wide_old, repo_wide_used, legacy, docs], ["src/legacy/a.py"], 1000, estimate=len)

    assert [x.id for x in chosen] == [3, 2, 1]
    one_line = len(prompt_line(legacy)) + 1
    assert [x.id for x in relevant([repo_wide_old, legacy], ["src/legacy/a.py"], one_line, estimate=len)] == [3]
    assert relevant([legacy], ["src/legacy/a.py"], one_line - 1, estimate=len) == []


def test_a_do_not_flag_learning_covers_a_finding_about_its_subject_under_its_glob() -> None:
    rule = learning(5, "Do not flag missing input validation in internal helpers.", glob="src/internal/**")
    finding = "**Missing input validation**: `parse` never validates its input from internal helpers callers."

    assert covers(rule, "src/internal/parse.py", finding)
    assert not covers(rule, "src/api/parse.py", finding)  # outside its glob
    assert not covers(rule, "src/internal/parse.py", "Possible SQL injection through string formatting.")
    assert not covers(replace(rule, kind="prefer"), "src/internal/parse.py", finding)
    # A learning with a single subject word covers nothing by the pure rule (too easy to withhold the wrong finding).
    assert not covers(learning(6, "Do not flag typos."), "a.py", "Typos in the log message.")
    assert covering([learning(9, rule.text), rule], "src/internal/x.py", finding) == rule
    # Only the rule's subject counts, not the reason the team gave for it.
    reasoned = learning(7, "Do not flag unclosed files: our scripts exit right after, so the OS closes them.")
    assert covers(reasoned, "bin/run.py", "The unclosed file handle leaks.") and "files" in subject_of(reasoned.text)
    assert subject_of("Do not flag globals because legacy code needs them") == "Do not flag globals "


def test_the_prompt_line_names_the_learning_its_kind_and_its_glob() -> None:
    line = prompt_line(learning(12, "Do not flag globals in legacy code.", glob="src/legacy/**"))
    assert line == "- [learning 12] (do-not-flag, files src/legacy/**) Do not flag globals in legacy code."


def test_a_findings_key_is_its_file_line_content_and_text_whatever_its_line_number_or_spacing() -> None:
    key = finding_key("src/a.py", "return  x", "d1")
    assert key == finding_key("src/a.py", " return x ", "d1")
    assert len({key, finding_key("src/b.py", "return x", "d1"), finding_key("src/a.py", "return x", "d2")}) == 3


def test_a_finding_that_shares_only_part_of_a_learnings_subject_is_published() -> None:
    rule = learning(8, "Do not flag missing null validation in internal helpers.")
    assert not covers(rule, "a.py", "Missing null validation on user input allows SQL injection.")
    assert covers(rule, "a.py", "Missing null validation in the internal helper `norm`.")


def test_the_pure_rule_reads_a_findings_title_not_the_rest_of_its_body() -> None:
    rule = learning(9, "Do not flag unclosed files.")
    about_it = ModelComment("a.py", 3, "**Unclosed file** in `load`.\n\nWrap it in `with`.")
    mentions_it = ModelComment("a.py", 5, "SQL injection through `query`.\n\nUnlike the unclosed file above, fix this.")

    kept, withheld = withhold_covered([about_it, mentions_it], [rule])

    assert kept == [mentions_it] and [(w.comment, w.reason, w.learning) for w in withheld] == [
        (about_it, TEAM_LEARNING, 9)
    ]


def test_a_proposed_learning_says_nothing_its_reply_does_not() -> None:
    reply = "Intended. Do not flag a file never closed here: our scripts exit at once."
    assert drawn_from("Do not flag a file never closed: our scripts exit at once.", reply)
    # The model's paraphrase of another comment in the thread carries words the reply never said.
    assert not drawn_from("Do not flag SQL injection or hard-coded secrets anywhere.", reply)
    assert not drawn_from("Do not flag it.", reply)  # nothing distinctive: no learning


def test_a_glob_the_writer_names_binds_the_learning_else_none() -> None:
    assert glob_in("Fine in tools/** since they only see trusted data.") == "tools/**"
    assert glob_in("All of `scripts/run.py` is throwaway.") == "scripts/run.py"
    assert glob_in("Intended, it is fine.") is None
    assert glob_in("see `../etc/*` and " + "**/" * 10 + "x") is None  # invalid or unbounded globs are no binding


def test_the_preview_names_what_a_learning_would_have_withheld_and_never_a_critical_finding() -> None:
    @dataclass(frozen=True)
    class Seen:
        path: str
        line: int
        pr_number: int
        title: str
        severity: str

    rule = replace(learning(3, "Do not flag unclosed files.", glob="src/**"), status="pending")
    seen = [
        Seen("src/a.py", 4, 7, "Unclosed file in `load`.", "warning"),
        Seen("src/b.py", 9, 8, "Unclosed file in `save`.", "critical"),
        Seen("lib/c.py", 2, 9, "Unclosed file in `read`.", "warning"),
        Seen("src/d.py", 1, 9, "Division by zero.", "warning"),
    ]
    found = withheld_by(rule, seen)
    assert found == [seen[0]]
    text = preview_text(found, len(seen))
    assert text.startswith("Preview: it would have withheld 1 of this repository's 4 most recent findings:")
    assert "- `src/a.py` line 4 (#7): Unclosed file in 'load'." in text
    assert preview_text([], 0) == "Preview: it would have withheld none of this repository's 0 most recent findings."
