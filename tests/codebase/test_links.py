"""A reference is linked to a definition in another file only when its file can mean that one (links.py), not by a
shared name: the noise the blind reviewers named (``re.compile`` as a caller of ``Rule.compile``, Go's ``string(x)``
as a caller of a method ``string``, ``err.Error()`` in files that never name the error type, ``super().__init__``,
two same-named classes behind one package) stays out of the related code, and what an import makes plausible stays
in. Each case here was seen in the quality corpus."""

from __future__ import annotations

from pathlib import Path

from reviewer_app.codebase.links import Defined, FileView, imported_modules, imported_names, links, module_names
from reviewer_app.codebase.tags import Tag, file_tags
from tests.codebase.test_search import make_snapshot


def ref(source_path: str, source: str, name: str) -> Tag:
    [tag] = [t for t in file_tags(source_path, source) or [] if t.name == name and not t.is_definition]
    return tag


def target(path: str, text: str, name: str, **extra: object) -> Defined:
    [tag] = [t for t in file_tags(path, text) or [] if t.name == name and t.is_definition]
    return Defined(path, tag, module_names(path, text), **extra)  # type: ignore[arg-type]


RULES = "class Rule:\n    def compile(self):\n        return 1\n"


def test_a_call_on_an_imported_module_is_not_a_call_of_a_method_that_shares_its_name() -> None:
    source = "import re\nfrom .rules import Rule\n\n\ndef f():\n    return re.compile('x')\n"
    compile_method = target("routing/rules.py", RULES, "compile")
    assert not links(ref("routing/map.py", source, "compile"), FileView.of("routing/map.py", source), compile_method)
    # The same method called on the class's own name, or on a value of a class the file names, is linked.
    named = "from .rules import Rule\n\n\ndef f(rule: Rule):\n    return rule.compile()\n"
    assert links(ref("routing/map.py", named, "compile"), FileView.of("routing/map.py", named), compile_method)


def test_a_bare_name_is_never_a_method_and_a_go_function_only_in_its_own_package() -> None:
    method = 'package cobra\n\ntype BashCompDirective int\n\nfunc (d BashCompDirective) string() string { return "" }\n'
    conversion = "package cmd\n\nfunc f(x []byte) string { return string(x) }\n"
    string_method = target("completions.go", method, "string")
    assert not links(ref("cmd/add.go", conversion, "string"), FileView.of("cmd/add.go", conversion), string_method)
    helper = target("args.go", "package cobra\n\nfunc legacyArgs() error { return nil }\n", "legacyArgs")
    same_package = "package cobra\n\nfunc g() { legacyArgs() }\n"
    other_package = "package doc\n\nfunc g() { legacyArgs() }\n"
    assert links(ref("command.go", same_package, "legacyArgs"), FileView.of("command.go", same_package), helper)
    assert not links(ref("doc/x.go", other_package, "legacyArgs"), FileView.of("doc/x.go", other_package), helper)


def test_a_method_call_on_a_value_needs_its_class_a_base_or_a_subclass_named_in_the_file() -> None:
    error_type = "package cobra\n\ntype flagCompError struct{ name string }\n\nfunc (e *flagCompError) Error() string { return e.name }\n"
    caller = "package cobra\n\nfunc f(err error) string { return err.Error() }\n"
    method = target("completions.go", error_type, "Error")
    assert not links(ref("args_test.go", caller, "Error"), FileView.of("args_test.go", caller), method)
    # A struct's named fields are not its bases: ``name string`` does not make every file that says "string" name it.
    assert method.bases == frozenset()
    through_subclass = (
        "import { PromisableRequest } from './core';\n\nfunction f(r: PromisableRequest) { r.finalize(1); }\n"
    )
    finalize = target("source/core/index.ts", "export class Request {\n  finalize(x) {}\n}\n", "finalize")
    view = FileView.of("source/as-promise/index.ts", through_subclass)
    assert not links(ref("source/as-promise/index.ts", through_subclass, "finalize"), view, finalize)
    derived = Defined(finalize.path, finalize.tag, finalize.modules, derived=frozenset({"PromisableRequest"}))
    assert links(ref("source/as-promise/index.ts", through_subclass, "finalize"), view, derived)


def test_super_init_is_linked_to_no_class() -> None:
    source = "from .base import Base\n\n\nclass C(Base):\n    def __init__(self):\n        super().__init__()\n"
    init = target("pkg/base.py", "class Base:\n    def __init__(self):\n        pass\n", "__init__")
    assert not links(ref("pkg/c.py", source, "__init__"), FileView.of("pkg/c.py", source), init)


def test_imports_are_read_as_written() -> None:
    python = "import os.path as p, re\nfrom .core import Context, \\\n    Argument\nfrom x import (a,\n  b as c)\n"
    assert imported_modules("m.py", python) == {"p", "re"}
    assert imported_names("m.py", python) == {"Context": {"core"}, "Argument": {"core"}, "a": {"x"}, "c": {"x"}}
    js = "import got, {Options as O} from '../source/index.js';\nconst {a, b: c} = require('./lib/utils');\n"
    js += "const rebase = require('../yargs').rebase\nimport * as fs from 'node:fs'\n"
    assert imported_modules("t.js", js) == {"got", "fs"}
    names = imported_names("t.js", js)
    assert names["O"] == {"source"} and names["c"] == {"lib", "utils"} and names["rebase"] == {"yargs"}
    go = 'package x\n\nimport (\n\t"os"\n\te "github.com/labstack/echo/v4"\n)\nimport "strings"\n'
    assert imported_modules("x.go", go) == {"os", "e", "strings"}


def test_related_code_leaves_out_what_only_a_name_links(tmp_path: Path) -> None:
    files = {
        "pkg/__init__.py": "from .core import Argument\n",
        "pkg/core.py": "class Argument:\n    pass\n",
        "pkg/parser.py": "class Argument:\n    pass\n",
        "pkg/rules.py": RULES,
        "pkg/util.py": "import re\nfrom .rules import Rule\n\nPATTERN = re.compile('x')\n\n\ndef helper():\n"
        "    def inner():\n        return 1\n    return inner()\n",
        "pkg/change.py": "import pkg\nfrom .util import helper\n\n\nclass Custom(pkg.Argument):\n    def run(self):\n"
        "        return helper() + inner()\n",
        "tests/test_rules.py": "".join(
            f"from pkg.rules import Rule\n\n\ndef test_{i}():\n    Rule().compile()\n" for i in range(6)
        ),
        "pkg/use.py": "from .rules import Rule\n\n\ndef use():\n    return Rule().compile()\n",
    }
    snapshot = make_snapshot(tmp_path, files)
    # Rule.compile changed: its callers are the files that name Rule (code first, then at most 3 tests), never the
    # module-level re.compile of util.py.
    whys = [(s.path, s.why) for s in snapshot.related("pkg/rules.py", 2, 3, budget_tokens=5000)[0]]
    assert whys[0] == ("pkg/use.py", "caller of Rule.compile, in use")
    assert [p for p, _ in whys].count("tests/test_rules.py") == 3
    assert not any(p == "pkg/util.py" for p, _ in whys)
    # The change's class: its base is the Argument the package exports (core's, not parser's); helper() is util's,
    # and inner() (a closure of helper) is nobody's to call from here.
    whys = [(s.path, s.why) for s in snapshot.related("pkg/change.py", 5, 7, budget_tokens=5000)[0]]
    assert ("pkg/core.py", "class Argument, which the changed code implements") in whys
    assert not any(p == "pkg/parser.py" for p, _ in whys)
    assert ("pkg/util.py", "definition of helper, called by the change") in whys
    assert not any("inner" in w for _, w in whys)


def test_a_changed_constructor_shows_where_its_class_is_built_and_a_test_change_shows_no_callees(
    tmp_path: Path,
) -> None:
    files = {
        "app/store.py": "class Store:\n    def __init__(self, path):\n        self.path = path\n",
        "app/sub.py": "from .store import Store\n\n\nclass Sub(Store):\n    def __init__(self):\n"
        "        super().__init__('x')\n",
        "app/main.py": "from .store import Store\n\n\ndef main():\n    return Store('db')\n",
        "tests/test_store.py": "from app.store import Store\n\n\ndef test_it():\n    assert Store('a').path == 'a'\n",
    }
    snapshot = make_snapshot(tmp_path, files)
    whys = [(s.path, s.why) for s in snapshot.related("app/store.py", 2, 3, budget_tokens=5000)[0]]
    assert ("app/main.py", "caller of Store, in main") in whys
    assert not any(p == "app/sub.py" and w.startswith("caller") for p, w in whys)  # super().__init__ names no class
    assert snapshot.related("tests/test_store.py", 4, 5, budget_tokens=5000) == ([], 0)


def test_code_the_pull_request_did_not_change_comes_before_code_it_changed(tmp_path: Path) -> None:
    from reviewer_app.codebase import ChangedText
    from reviewer_app.codebase.snapshot import overlay

    files = {
        "lib/api.py": "def fetch(url):\n    return url\n",
        "lib/a_changed.py": "from .api import fetch\n\n\ndef one():\n    return fetch('a')\n",
        "lib/z_kept.py": "from .api import fetch\n\n\ndef two():\n    return fetch('z')\n",
    }
    snapshot = make_snapshot(tmp_path, files)
    # make_snapshot holds every file as changed; mark only a_changed.py (and api.py) as changed by the pull request.
    tree = overlay({}, {p: ChangedText(p, t) for p, t in files.items()})
    snapshot.files["lib/z_kept.py"] = type(tree["lib/z_kept.py"])(tree["lib/z_kept.py"].blob, 40, True, None)
    snapshot._texts["lib/z_kept.py"] = files["lib/z_kept.py"]
    whys = [s.path for s in snapshot.related("lib/api.py", 1, 2, budget_tokens=5000)[0]]
    assert whys == ["lib/z_kept.py", "lib/a_changed.py"]


def test_an_index_from_before_receivers_is_parsed_again_and_keeps_its_files(tmp_path: Path) -> None:
    import sqlite3

    from reviewer_app.codebase.index import TagStore

    db = sqlite3.connect(tmp_path / "index.sqlite")
    db.executescript(
        "CREATE TABLE contents (blob TEXT PRIMARY KEY, data BLOB NOT NULL);"
        "CREATE TABLE blobs (blob TEXT PRIMARY KEY, tags INTEGER NOT NULL);"
        'CREATE TABLE tags (blob TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL, line INTEGER NOT NULL, "end" '
        "INTEGER NOT NULL, scope TEXT NOT NULL);"
        "INSERT INTO contents VALUES ('b1', x'41');"
        "INSERT INTO blobs VALUES ('b1', 1);"
        "INSERT INTO tags VALUES ('b1', 'f', 'call', 1, 1, '');"
    )
    db.commit()
    db.close()
    store = TagStore(tmp_path / "index.sqlite")
    try:
        assert store.content("b1") == b"A"  # the archive's files stay: no new download
        assert store.known(["b1"]) == set()  # its tags are parsed again, with receivers
        store.add({"b1": [Tag("compile", "call", 1, 1, "", "re")]})
        assert store.of_blob("b1") == [Tag("compile", "call", 1, 1, "", "re")]
    finally:
        store.close()


def test_a_method_every_builtin_value_has_needs_a_receiver_that_names_the_class() -> None:
    headers = target("httpx/_models.py", "class Headers:\n    def items(self):\n        return []\n", "items")
    source = (
        "from ._models import Headers\n\n\n"
        "def f(proxies, request):\n    a = proxies.items()\n    return request.headers.items()\n"
    )
    view = FileView.of("httpx/_client.py", source)
    calls = [t for t in file_tags("httpx/_client.py", source) or [] if t.name == "items"]
    assert [(t.receiver, links(t, view, headers)) for t in calls] == [("proxies", False), ("request.headers", True)]
    stringer = 'package toml\n\ntype Position struct{ Line int }\n\nfunc (p Position) String() string { return "" }\n'
    position = target("lex.go", stringer, "String")
    uses = "package toml\n\n// Position\nfunc f(p *parser, key Key) {\n\t_ = key.String()\n\t_ = p.pos.String()\n}\n"
    view = FileView.of("parse.go", uses)
    calls = [t for t in file_tags("parse.go", uses) or [] if t.name == "String"]
    assert [(t.receiver, links(t, view, position)) for t in calls] == [("key", False), ("p.pos", True)]


JAVA = """package com.google.gson.stream;

public class JsonReader implements Closeable {
  public String nextString() throws IOException {
    int p = peeked;
    return "x";
  }
}
"""
RUST = """use crate::error::Error;

pub struct SliceRead<'a> {
    slice: &'a [u8],
}

impl<'a> Read<'a> for SliceRead<'a> {
    fn ignore_str(&mut self) -> Result<()> {
        self.skip();
        Ok(())
    }
}
"""


def test_java_and_rust_are_indexed_and_their_scopes_found_by_their_grammar(tmp_path: Path) -> None:
    from reviewer_app.codebase.scopes import enclosing_scope, has_grammar

    snapshot = make_snapshot(tmp_path, {"gson/stream/JsonReader.java": JAVA, "src/read.rs": RUST})
    java = snapshot.find_definition("JsonReader#nextString")
    assert "gson/stream/JsonReader.java:4-7: method JsonReader.nextString: public String nextString()" in java
    rust = snapshot.find_definition("SliceRead::ignore_str")
    assert "src/read.rs:8-11: method SliceRead.ignore_str: fn ignore_str(&mut self) -> Result<()> {" in rust
    assert "src/read.rs:3-5: type SliceRead" in snapshot.find_definition("SliceRead")
    assert has_grammar("a.java") and has_grammar("a.rs")
    assert enclosing_scope("JsonReader.java", JAVA, 5) == (4, 7)  # the method, not an indentation guess
    assert enclosing_scope("read.rs", RUST, 9) == (8, 11)
