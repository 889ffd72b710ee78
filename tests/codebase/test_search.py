"""The model's searches of the codebase are bounded and say what they did not show: literal and RE2 searches (a
catastrophic pattern answers at once, an unsupported one is refused), path filters, binary and huge files skipped,
definitions and references by name; and the cross-file code chosen for a change, ranked and within its budget."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from reviewer_app.codebase import ChangedText
from reviewer_app.codebase import search as search_module
from reviewer_app.codebase.index import TagStore, bring_up_to_date
from reviewer_app.codebase.settings import CodebaseSettings
from reviewer_app.codebase.snapshot import FileAt, Snapshot, overlay


def make_snapshot(tmp_path: Path, files: dict[str, str], binary: dict[str, int] | None = None) -> Snapshot:
    """A snapshot of ``files`` (all held in memory, as a pull request's changed files are) and binary files."""
    tree = overlay({}, {p: ChangedText(p, t) for p, t in files.items()})
    for path, size in (binary or {}).items():
        tree[path] = FileAt("0" * 40, size, False)
    store = TagStore(tmp_path / "index.sqlite")
    snapshot = Snapshot("o/r", "h" * 40, store, tree, None, CodebaseSettings())  # type: ignore[arg-type]
    snapshot.index, snapshot.parsed = bring_up_to_date(
        store, {p: (f.blob, f.size) for p, f in tree.items() if f.text}, snapshot.text
    )
    return snapshot


STORE = '''class Store:
    """Where tokens live."""

    def load(self, key):
        return self.data[key]


class MemoryStore(Store):
    def load(self, key):
        return self.cache.get(key)
'''
TOKEN = '''from store import Store


def verify(token, store: Store):
    """Check a token against the store."""
    value = store.load(token.key)
    return value == token.digest
'''
API = """from token import verify


def handle(request, store):
    if not verify(request.token, store):
        raise PermissionError("bad token")
    return "ok"
"""


@pytest.fixture
def snapshot(tmp_path: Path) -> Snapshot:
    many = "\n".join(f"hit_{i} = 'needle'" for i in range(120)) + "\n"
    return make_snapshot(
        tmp_path,
        {"store.py": STORE, "auth/token.py": TOKEN, "web/api.py": API, "data/many.py": many},
        binary={"logo.png": 2000},
    )


def test_a_literal_search_is_bounded_and_counts_what_it_did_not_show(snapshot: Snapshot) -> None:
    answer = snapshot.search_code("needle", limit=5)
    lines = answer.split("\n")
    assert lines[0] == "120 matching lines in 1 files for the literal 'needle'"
    assert lines[1:6] == [f"data/many.py:{n}: hit_{n - 1} = 'needle'" for n in range(1, 6)]
    assert lines[6] == "[115 more matches not shown: narrow the pattern or the path filter]"


def test_a_path_filter_narrows_the_search(snapshot: Snapshot) -> None:
    assert snapshot.search_code("store", path_glob="web/*").startswith("2 matching lines in 1 files")
    assert snapshot.search_code("store", path_glob="auth/").startswith("4 matching lines in 1 files")
    assert (
        snapshot.search_code("needle", path_glob="*.ts") == "no match for the literal 'needle' in files matching '*.ts'"
    )


def test_a_path_filter_reads_globs_as_the_rest_of_the_app_does(tmp_path: Path) -> None:
    # ``**/`` is zero or more folders (fnmatch read it as one or more: the top-level pom.xml and source/index.ts were
    # never searched); ``*`` stays within a folder, and a folder the glob matches covers what it holds, as ripgrep's
    # and .gitignore's globs read (core/globs.py).
    snap = make_snapshot(
        tmp_path,
        {"pom.xml": "needle\n", "sub/pom.xml": "needle\n", "source/index.ts": "needle\n", "source/a/b.ts": "needle\n"},
    )
    assert snap.search_code("needle", path_glob="**/pom.xml").split("\n")[1:] == [
        "pom.xml:1: needle",
        "sub/pom.xml:1: needle",
    ]
    assert snap.search_code("needle", path_glob="source/**/*.ts").split("\n")[1:] == [
        "source/a/b.ts:1: needle",
        "source/index.ts:1: needle",
    ]
    assert snap.search_code("needle", path_glob="source/*.ts").split("\n")[1:] == ["source/index.ts:1: needle"]
    assert snap.search_code("needle", path_glob="source/*").split("\n")[1:] == [
        "source/a/b.ts:1: needle",
        "source/index.ts:1: needle",
    ]
    assert snap.search_code("needle", path_glob="/pom.xml").split("\n")[1:] == ["pom.xml:1: needle"]


def test_a_path_filter_that_is_not_a_glob_is_refused(tmp_path: Path) -> None:
    snap = make_snapshot(tmp_path, {f"d{i}/" + "a" * 60 + ".py": "needle\n" for i in range(200)})
    assert snap.search_code("needle", path_glob="../etc/*").startswith(
        "refused: the path is not a repository path glob"
    )
    assert snap.search_code("needle", path_glob="src dir/*").startswith("refused")
    assert snap.search_code("needle", path_glob="**a*a*a*a*a*a*a*a*b").startswith("no match")  # core/globs.py: linear


def test_a_catastrophic_regex_answers_at_once_and_an_unsupported_one_is_refused(tmp_path: Path) -> None:
    snap = make_snapshot(tmp_path, {"slow.py": "x = '" + "a" * 30_000 + "!'\n"})
    started = time.monotonic()
    assert snap.search_code("(a+)+$", regex=True) == "no match for the regular expression '(a+)+$'"
    assert snap.search_code("(a|aa)*c", regex=True).startswith("no match")
    assert time.monotonic() - started < 2  # backtracking engines take ages on these; RE2 is linear
    assert snap.search_code(r"(?<=x) =", regex=True).startswith("refused: not a valid RE2 regular expression")
    assert snap.search_code(r"(\w)\1", regex=True).startswith("refused")
    assert snap.search_code("", regex=False).startswith("refused")
    assert snap.search_code("x" * 301).startswith("refused")
    assert snap.search_code(r"x = '(a{3})", regex=True).startswith("1 matching lines")


def test_binary_and_huge_files_are_not_searched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_module, "MAX_SEARCHED_BYTES", 100)
    snap = make_snapshot(tmp_path, {"big.py": "needle = 1\n" * 20, "small.py": "needle = 2\n"}, binary={"b.bin": 5})
    answer = snap.search_code("needle")
    assert answer.startswith("1 matching lines in 1 files") and "small.py:1" in answer and "big.py" not in answer
    assert answer.endswith("[1 files over 0 KB not searched]")
    assert snap.read_file("b.bin") == "b.bin: a binary file (5 bytes), not shown"


def test_a_search_past_its_time_says_it_stopped(snapshot: Snapshot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_module, "SEARCH_SECONDS", -1.0)
    assert snapshot.search_code("needle").startswith("no match in the files searched within")


def test_definitions_and_references_by_name(snapshot: Snapshot) -> None:
    definitions = snapshot.find_definition("load")
    assert definitions.split("\n") == [
        "2 definitions of 'load'",
        "store.py:4-5: method Store.load: def load(self, key):",
        "store.py:9-10: method MemoryStore.load: def load(self, key):",
    ]
    assert snapshot.find_definition("MemoryStore.load").startswith("1 definitions of 'MemoryStore.load'")
    assert snapshot.find_definition("nothing").startswith("no definition of 'nothing'")
    references = snapshot.find_references("verify")
    assert references.split("\n")[1] == "web/api.py:5 in handle (call): if not verify(request.token, store):"
    assert "store.py:8 in MemoryStore (base)" in snapshot.find_references("Store")


def test_read_file_and_list_directory_are_bounded(snapshot: Snapshot) -> None:
    assert snapshot.read_file("auth/token.py", 4, 5) == (
        "auth/token.py: lines 4-5 of 7\n     4 | def verify(token, store: Store):\n"
        '     5 |     """Check a token against the store."""\n[2 more lines: ask for start_line 6]'
    )
    assert snapshot.read_file("missing.py") is None
    assert snapshot.list_directory("") == ["auth/", "data/", "logo.png", "store.py", "web/"]
    assert snapshot.list_directory("auth") == ["token.py"]


def test_related_code_of_a_change_callers_callees_and_implementers_nearest_first(snapshot: Snapshot) -> None:
    # The change: verify's body (auth/token.py lines 4-7).
    snippets, left_out = snapshot.related("auth/token.py", 4, 7, budget_tokens=5000)
    assert left_out == 0
    assert [(s.path, s.start, s.end, s.why) for s in snippets] == [
        ("web/api.py", 4, 7, "caller of verify, in handle"),
        ("store.py", 4, 5, "definition of Store.load, called by the change"),
        ("store.py", 9, 10, "definition of MemoryStore.load, called by the change"),
    ]
    assert snippets[0].text.split("\n")[1] == "    if not verify(request.token, store):"


def test_a_changed_base_class_shows_who_overrides_it(snapshot: Snapshot) -> None:
    snippets, _ = snapshot.related("store.py", 4, 5, budget_tokens=5000)  # Store.load changed
    whys = [s.why for s in snippets]
    assert "caller of Store.load, in verify" in whys
    # MemoryStore is in the same file here: only other files' code is shown.
    assert not any(s.path == "store.py" for s in snippets)


def test_related_code_within_its_budget_counts_what_it_left_out(snapshot: Snapshot) -> None:
    snippets, left_out = snapshot.related("auth/token.py", 4, 7, budget_tokens=60)
    assert [s.why for s in snippets] == ["caller of verify, in handle"]
    assert left_out == 2
    assert snapshot.related("auth/token.py", 4, 7, budget_tokens=0) == ([], 3)


def test_anchors_match_at_the_start_of_any_line_not_only_the_files(tmp_path: Path) -> None:
    snap = make_snapshot(tmp_path, {"consts.go": 'package http\n\nconst (\n\tPOST    = "POST"\n)\n'})
    assert snap.search_code(r"^\s*POST\s*=", regex=True).startswith("1 matching lines")
    assert "consts.go:4:" in snap.search_code(r"^\s*POST\s*=", regex=True)
    assert snap.search_code(r"^const \($", regex=True).startswith("1 matching lines")


def test_find_definition_shows_the_code_of_the_first_definitions_with_a_body_when_asked(tmp_path: Path) -> None:
    long_body = "\n".join(f"    step_{i} = {i}" for i in range(60))
    files = {
        "api.ts": "export interface Store {\n  load(key: string): string;\n}\n",
        "store.py": f"class Store:\n    def load(self, key):\n        return self.data[key]\n\n\ndef load(path):\n{long_body}\n",
    }
    snapshot = make_snapshot(tmp_path, files)
    plain = snapshot.find_definition("load")
    assert "|" not in plain  # the listing alone: where, what, the first line
    shown = snapshot.find_definition("load", bodies=2)
    assert shown.startswith(plain)  # the same listing, then the code
    assert "return self.data[key]" in shown and "step_0 = 0" in shown
    assert "step_38 = 38" in shown and "step_39 = 39" not in shown  # at most DEFINITION_BODY_LINES lines each
    assert shown.count(": lines ") == 2  # the interface's one-line declaration has no body to show


YARGS = """function Yargs (processArgs) {
  const self = {}
  self.resetOptions = self.reset = function resetOptions (aliases) {
    options = freshOptions(aliases)
    return self
  }
  Yargs.prototype.parse = (args) => { runParser(args) }
  return self
}
module.exports = function () { return Yargs() }
const commands = { add: function (cmd) { register(cmd) } }
"""


def test_a_javascript_function_bound_to_a_member_or_a_key_is_a_definition(tmp_path: Path) -> None:
    # ``self.reset = function reset () {...}`` is how much JavaScript defines its methods (yargs names most twice:
    # ``self.resetOptions = self.reset = ...``): a lookup of ``reset`` found only a test helper, and calls inside it
    # were the outer function's. A test's helper of the same name now comes after the code's own definition.
    snap = make_snapshot(tmp_path, {"yargs.js": YARGS, "test/helpers.js": "function reset () { clear() }\n"})
    definitions = snap.find_definition("reset")
    assert definitions.split("\n")[:3] == [
        "2 definitions of 'reset'",
        # the code's own definition before the test helper of the same name (which sorts first by path)
        "yargs.js:3-6: function reset: self.resetOptions = self.reset = function resetOptions (aliases) {",
        "test/helpers.js:1-1: function reset: function reset () { clear() }",
    ]
    assert snap.find_definition("resetOptions").split("\n")[1].startswith("yargs.js:3-6: function resetOptions")
    assert snap.find_definition("parse").split("\n")[1].startswith("yargs.js:7-7: function parse")
    assert snap.find_definition("add").split("\n")[1].startswith("yargs.js:11-11: function add")
    assert snap.find_definition("exports").startswith("no definition")  # module.exports names no function
    assert "yargs.js:4 in reset (call): options = freshOptions(aliases)" in snap.find_references("freshOptions")
    assert "yargs.js:11 in add (call):" in snap.find_references("register")
