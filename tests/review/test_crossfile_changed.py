"""What the codebase is told of each changed file (review/crossfile.py's changed_texts): the head text of a file the
review read, the diff of one it showed without reading, and nothing (left out of the tree) for one it did not show,
so no changed file is ever served to the model as the base had it."""

from __future__ import annotations

from reviewer_app.codebase import ChangedText
from reviewer_app.core.diff import parse_patch
from reviewer_app.review.crossfile import changed_texts
from reviewer_app.review.prompt import PromptFile
from reviewer_app.review.selection import ChangedFile

PATCH = "@@ -1,1 +1,1 @@\n-a = 1\n+a = 2\n"


def test_read_shown_and_unshown_changed_files() -> None:
    changed = [
        ChangedFile("read.py", "modified", None, 1, 1, None),
        ChangedFile("shown.py", "modified", None, 1, 1, None),
        ChangedFile("package-lock.json", "modified", None, 900, 900, None),
        ChangedFile("gone.py", "removed", None, 0, 3, None),
    ]
    diff = parse_patch("shown.py", PATCH)
    files = {
        "read.py": PromptFile("read.py", parse_patch("read.py", PATCH), head_lines=["a = 2", ""]),
        "shown.py": PromptFile("shown.py", diff),
    }
    assert changed_texts(changed, files) == {
        "read.py": ChangedText("read.py", "a = 2\n"),
        "shown.py": ChangedText("shown.py", None, None, diff),
        "package-lock.json": ChangedText("package-lock.json", None),
        "gone.py": ChangedText("gone.py", None),
    }
