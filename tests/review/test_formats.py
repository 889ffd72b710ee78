"""What `reviewer-app review` prints, from plain data: the terminal's text (colour only where it is wanted), SARIF
2.1.0 checked against its schema, the cost of every kind of token, and the progress on stderr."""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema

from reviewer_app.core.pricing import DEFAULT_PRICES
from reviewer_app.core.review_model import ModelComment
from reviewer_app.review.formats import Report, as_sarif, as_text, spend, terminal_safe, wants_colour
from reviewer_app.review.progress import Progress

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "sarif-schema-2.1.0.json").read_text())
FINDINGS = (
    ModelComment("a b/x.py", 3, "Minor naming.", severity="nit"),
    ModelComment("src/x.py", 9, "Crashes on None.", severity="critical", start_line=7, suggestion="if v:\n    go()"),
    ModelComment("src/x.py", 2, "Removed guard.", side="LEFT", severity="warning"),
)
REPORT = Report("o/r#1 at abc", "a" * 40, "Summary.", FINDINGS)


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_text_puts_the_most_severe_first_each_once_with_path_line_and_fix() -> None:
    out = as_text(REPORT, colour=False)
    assert out.index("CRITICAL  src/x.py:7-9") < out.index("WARNING  src/x.py:2 (a removed line") < out.index("NIT")
    assert out.count("Crashes on None.") == 1
    assert "  | if v:\n  |     go()" in out
    assert "\x1b" not in out


def test_colour_only_on_a_terminal_and_never_with_no_color() -> None:
    assert wants_colour({"TERM": "xterm"}, tty=True)
    assert not wants_colour({"TERM": "xterm", "NO_COLOR": "1"}, tty=True)
    assert not wants_colour({"TERM": "dumb"}, tty=True)
    assert not wants_colour({"TERM": "xterm"}, tty=False)
    assert "\x1b[31;1mCRITICAL\x1b[0m" in as_text(REPORT, colour=True)


def test_what_the_model_wrote_cannot_reach_the_terminal_as_escapes() -> None:
    # The escape goes whole, its text with it (core/terminal.py): no "]0;title" left behind.
    assert terminal_safe("ok\x1b]0;title\x07 <!-- marker -->done\u202e") == "ok done"


def test_sarif_validates_against_the_2_1_0_schema_with_a_level_per_severity() -> None:
    sarif = as_sarif(REPORT, version="1.2.3", repository_uri="https://github.com/o/r")
    jsonschema.validate(sarif, SCHEMA)
    results = sarif["runs"][0]["results"]
    assert [r["level"] for r in results] == ["error", "warning", "note"]
    critical, removed, nit = results
    assert critical["locations"][0]["physicalLocation"]["region"] == {"startLine": 7, "endLine": 9}
    assert "region" not in removed["locations"][0]["physicalLocation"]  # the old file's line is in no file at head
    assert nit["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "a%20b/x.py"


def test_sarif_with_no_finding_is_valid_too() -> None:
    jsonschema.validate(as_sarif(Report("x", "b" * 40, "", ()), version="unknown"), SCHEMA)


def test_the_cost_counts_every_kind_of_token_of_the_review_and_the_verification() -> None:
    model = next(iter(DEFAULT_PRICES))
    row = {"model": model, "batched": 0, "input_tokens": 1, "output_tokens": 219}
    rows = [
        {**row, "kind": "reviews", "cache_creation_tokens": 2297, "cache_read_tokens": 0},
        {**row, "kind": "verification", "cache_creation_tokens": 0, "cache_read_tokens": 40},
    ]
    spent = spend(rows, DEFAULT_PRICES)
    assert spent.total("cache_creation_tokens") == 2297 and spent.total("cache_read_tokens") == 40
    assert spent.total("output_tokens") == 438
    assert spent.dollars is not None and spent.dollars > spend(rows[:1], DEFAULT_PRICES).dollars  # type: ignore[operator]
    assert "(verification)" in spent.line() and "2,297 cache-write" in spent.line()


def test_progress_shows_each_step_with_its_time_on_a_terminal_only() -> None:
    now = [100.0]
    shown = Tty()
    progress = Progress(shown, shown=True, clock=lambda: now[0])
    now[0] = 102.5
    progress.step("asking the model")
    assert shown.getvalue() == "reviewer-app:   2.5s  asking the model\n"
    hidden = io.StringIO()
    Progress(hidden, shown=False).step("asking the model")
    assert hidden.getvalue() == ""
