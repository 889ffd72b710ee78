"""The review-quality corpus (bench/quality_corpus/) is well formed: the manifest names permissively licensed cases
in at least three languages, SOURCES.md lists every case, and every built case JSON follows the shared format with
its known issues on lines that exist in the head text of their files."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[2] / "bench" / "quality_corpus"
MANIFEST = tomllib.loads((CORPUS / "manifest.toml").read_text())["case"]
BUILT = sorted(CORPUS.glob("*.json"))
PERMISSIVE = {"MIT", "Apache-2.0", "BSD-2-Clause", "BSD-3-Clause", "ISC", "MIT OR Apache-2.0", "Unlicense"}
SHA = re.compile(r"^[0-9a-f]{40}$")
COMMIT_URL = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/commit/[0-9a-f]{40}$")
CASE_KEYS = {"id", "language", "repo", "license", "source", "fix", "title", "body", "files", "known_issues"}


def fixes(case: dict) -> list[str]:
    return case["fix"] if isinstance(case["fix"], list) else [case["fix"]]


def test_manifest_has_twenty_cases_in_three_languages_with_unique_ids():
    ids = [case["id"] for case in MANIFEST]
    assert len(ids) >= 20
    assert len(set(ids)) == len(ids)
    assert len({case["language"] for case in MANIFEST}) >= 3


@pytest.mark.parametrize("case", MANIFEST, ids=lambda case: case["id"])
def test_manifest_case_names_full_commits_a_permissive_licence_and_its_issues(case):
    assert set(case) >= {"id", "language", "repo", "license", "source", "fix", "summary", "issue"}
    assert case["license"] in PERMISSIVE
    assert SHA.match(case["source"])
    assert all(SHA.match(fix) for fix in fixes(case))
    assert case["source"] not in fixes(case)
    assert case["issue"]
    for issue in case["issue"]:
        assert isinstance(issue["line"], int) and issue["line"] >= 1
        assert issue["path"] and issue["issue"].strip()
        assert issue.get("fix", fixes(case)[0]) in fixes(case)


def test_sources_md_lists_every_case_with_its_commits():
    sources = (CORPUS / "SOURCES.md").read_text()
    for case in MANIFEST:
        row = next((line for line in sources.splitlines() if line.startswith(f"| {case['id']} |")), None)
        assert row is not None, case["id"]
        assert case["source"] in row and all(fix in row for fix in fixes(case)) and case["license"] in row


def test_built_cases_match_the_manifest():
    if not BUILT:
        pytest.skip("no case JSON built here; run bench/quality_corpus/build.py against the repository snapshots")
    assert {path.stem for path in BUILT} == {case["id"] for case in MANIFEST}


@pytest.mark.parametrize("path", BUILT, ids=lambda path: path.stem)
def test_built_case_follows_the_format_with_issues_inside_the_head_text(path):
    case = json.loads(path.read_text())
    assert set(case) >= CASE_KEYS
    assert case["id"] == path.stem
    assert COMMIT_URL.match(case["source"]) and COMMIT_URL.match(case["fix"])
    assert case["license"] in PERMISSIVE
    assert isinstance(case["title"], str) and case["title"] and isinstance(case["body"], str)
    assert 1 <= len(case["files"]) <= 6
    heads = {}
    for changed in case["files"]:
        assert set(changed) == {"path", "base", "head"}
        assert changed["base"] is not None or changed["head"] is not None
        assert changed["base"] != changed["head"]
        heads[changed["path"]] = changed["head"]
    assert case["known_issues"]
    for issue in case["known_issues"]:
        head = heads.get(issue["path"])
        assert head is not None, issue["path"]
        assert 1 <= issue["line"] <= len(head.splitlines())
        assert issue["issue"].strip()
