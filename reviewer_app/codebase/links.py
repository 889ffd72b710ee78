"""Whether a reference (a call or a base type, as tags.py reads it) can mean a given definition in another file
(pure): a name alone is not enough. ``re.compile(...)`` is not a call of ``Rule.compile``, ``string(x)`` in Go is not
a call of a method ``string``, and ``err.Error()`` in a file that never names ``flagCompError`` is not a call of its
``Error``. The rules, for every language the index reads:

- a bare name (``verify(...)``, ``new Store()``, ``class A(Base)``) means a function, class or type, never a method
  nor a closure; in Go one of the same package (the same folder), in Java and Rust one of the same folder or one the
  file imports (``import a.b.C;``, ``use crate::b::C;``), elsewhere one the referring file imports by that name from
  a module its file or folder may be (``from .token import verify``, ``import {verify} from './token'``);
- a name looked up on an imported module (``re.compile``, ``exec.Command``, ``utils.parse``) means a function of that
  module: one defined in a file whose name or folder (or Go package) is the module's; a method only when the module
  name is its class's (a class imported by name, ``Rule.compile``);
- a name looked up on anything else (``self.load``, ``store.load``, ``os.environ.clear``) means a method of a class the
  referring file names, or of a class whose base or subclass it names (``MemoryStore.load`` for a file that names
  ``Store``);
- a special method (``__init__``) only through its class's own name: ``super().__init__`` does not say whose;
- a method every built-in value has (``items``, ``get``, ``write``, ``then``; Go's ``String`` and ``Error``) only
  on ``self`` or on a receiver whose name says the class (``headers.items()`` for ``Headers``, not ``proxies``).

Receivers are read as written; nothing is typed. The rules keep what an import makes plausible and drop what only a
shared name links."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from reviewer_app.codebase.scopes import grammar_name
from reviewer_app.codebase.tags import Tag

_PY_IMPORT = re.compile(r"^[ \t]*import[ \t]+([\w. \t,]+?)[ \t]*(?:#.*)?$", re.M)
_JS_MODULE = re.compile(
    r"\bimport\s+(?:\*\s+as\s+)?([A-Za-z_$][\w$]*)\s*(?:,\s*\{[^}]*\}\s*)?from\b"
    r"|\b(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=\s*(?:await\s+)?(?:require|import)\s*\("
)
_PY_FROM = re.compile(r"^[ \t]*from[ \t]+([.\w]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]*)", re.M)
_JS_FROM = re.compile(
    r"\bimport\s+(?:type\s+)?(?:([A-Za-z_$][\w$]*)\s*,?\s*)?(?:\*\s+as\s+[\w$]+\s*)?(?:\{([^}]*)\}\s*)?from\s*['\"]([^'\"]+)['\"]"
    r"|\b(?:const|let|var)\s+(?:\{([^}]*)\}|([A-Za-z_$][\w$]*))\s*=\s*require\s*\(\s*['\"]([^'\"]+)['\"]"
)
_JS_REQUIRE_MEMBER = re.compile(
    r"\b(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=\s*require\s*\(\s*['\"]([^'\"]+)['\"]\s*\)\s*\.\s*([A-Za-z_$][\w$]*)"
)
_JAVA_IMPORT = re.compile(r"^[ \t]*import[ \t]+(?:static[ \t]+)?([\w.]+)\.(\w+|\*)[ \t]*;", re.M)
_RUST_USE = re.compile(r"^[ \t]*(?:pub(?:\([^)]*\))?[ \t]+)?use[ \t]+([^;]+);", re.M)
_GO_IMPORT_BLOCK = re.compile(r"^import\s*\((.*?)^\)", re.M | re.S)
_GO_IMPORT_SPEC = re.compile(r'^[ \t]*(?:import[ \t]+)?(?:([A-Za-z_]\w*|\.)[ \t]+)?"([^"]+)"', re.M)
_GO_PACKAGE = re.compile(r"^package[ \t]+(\w+)", re.M)
_GO_VERSION = re.compile(r"^v\d+$")
_PACKAGE_FILES = frozenset({"__init__", "index", "mod", "main"})


def language(path: str) -> str:
    """The import rules a file follows: its grammar's (scopes.py), TypeScript's being JavaScript's."""
    grammar = grammar_name(path)
    return "javascript" if grammar in (None, "typescript", "tsx") else grammar


def _folder(path: str) -> str:
    return path.rpartition("/")[0]


def module_names(path: str, text: str) -> frozenset[str]:
    """The names a file of the tree answers to when imported: its file name without suffix, and its folder's name
    (a package: ``click/core.py`` is imported as ``core`` or reached through ``click``); a Go file's package clause."""
    name = PurePosixPath(path).stem if grammar_name(path) else path.rsplit("/", 1)[-1]
    names = {name} if name not in _PACKAGE_FILES else set()
    folder = _folder(path).rsplit("/", 1)[-1]
    if folder:
        names.add(folder)
    if language(path) == "go":
        package = _GO_PACKAGE.search(text)
        if package:
            names.add(package.group(1))
    return frozenset(names)


def imported_modules(path: str, text: str) -> frozenset[str]:
    """The names a file binds to whole modules (``import re``, ``import os.path as p``, ``import * as fs from``,
    ``const got = require('got')``, Go's imports by package name or alias)."""
    names: set[str] = set()
    kind = language(path)
    if kind == "python":
        for m in _PY_IMPORT.finditer(text):
            for part in m.group(1).split(","):
                words = part.split()
                if len(words) == 3 and words[1] == "as":
                    names.add(words[2])
                elif words:
                    names.add(words[0].split(".")[0])
    elif kind == "go":
        blocks = [m.group(1) for m in _GO_IMPORT_BLOCK.finditer(text)]
        singles = [ln for ln in text.split("\n") if ln.startswith("import ") and "(" not in ln]
        for chunk in [*blocks, *singles]:
            for m in _GO_IMPORT_SPEC.finditer(chunk):
                alias, where = m.group(1), m.group(2)
                if alias and alias not in (".", "_"):
                    names.add(alias)
                    continue
                parts = [p for p in where.split("/") if p]
                if len(parts) > 1 and _GO_VERSION.match(parts[-1]):
                    parts.pop()
                if parts:
                    names.add(parts[-1].replace("-", "_").removeprefix("go_").removesuffix(".go"))
    else:
        members = {m.group(1) for m in _JS_REQUIRE_MEMBER.finditer(text)}  # ``require('x').f``: a function
        for m in _JS_MODULE.finditer(text):
            names.add(m.group(1) or m.group(2))
        names -= members
    return frozenset(names)


def _segments(source: str) -> frozenset[str]:
    """The names a module path is made of (``..core.options`` or ``../core/options.js``: core, options)."""
    parts = re.split(r"[./\\]+", source)
    return frozenset(p for p in parts if p and p not in ("js", "ts", "mjs", "cjs", "jsx", "tsx", "index"))


def imported_names(path: str, text: str) -> dict[str, frozenset[str]]:
    """The names a Python or JavaScript file imports one by one (``from .core import Argument``, ``import {x} from
    './y'``, ``const {x} = require('./y')``, a default import), each with the names its module path is made of;
    ``*`` for a star import's modules."""
    out: dict[str, set[str]] = {}
    kind = language(path)
    if kind == "python":
        for m in _PY_FROM.finditer(text.replace("\\\n", " ")):
            segments = _segments(m.group(1))
            for part in m.group(2).strip("() \t\n").split(","):
                words = part.split()
                if words:
                    out.setdefault(words[-1], set()).update(segments)
    elif kind == "java":
        for m in _JAVA_IMPORT.finditer(text):
            out.setdefault(m.group(2), set()).update(_segments(m.group(1)))
    elif kind == "rust":
        for m in _RUST_USE.finditer(text):
            words = re.findall(r"[A-Za-z_]\w*", m.group(1))
            segments = {w for w in words if w not in ("crate", "self", "super", "as")}
            for word in words:
                out.setdefault(word, set()).update(segments)
    elif kind == "javascript":
        for m in _JS_FROM.finditer(text):
            default, braces, source = (
                (m.group(1), m.group(2), m.group(3)) if m.group(3) else (m.group(5), m.group(4), m.group(6))
            )
            segments = _segments(source)
            names = [default] if default else []
            for part in (braces or "").split(","):
                words = re.split(r"\s+as\s+|\s*:\s*", part.strip())
                if words and words[-1]:
                    names.append(words[-1].removeprefix("type ").strip())
            for name in names:
                out.setdefault(name, set()).update(segments)
        for m in _JS_REQUIRE_MEMBER.finditer(text):
            out.setdefault(m.group(1), set()).update(_segments(m.group(2)))
    return {k: frozenset(v) for k, v in out.items()}


@dataclass
class FileView:
    """What the rules read of a referring file: its text (for the names it mentions), the modules it imports whole and
    the names it imports one by one."""

    path: str
    text: str
    modules: frozenset[str]
    imported: dict[str, frozenset[str]]
    _named: dict[str, bool] = field(default_factory=dict)

    @classmethod
    def of(cls, path: str, text: str) -> FileView:
        return cls(path, text, imported_modules(path, text), imported_names(path, text))

    def imports(self, name: str, modules: frozenset[str]) -> bool:
        """Whether the file imports ``name`` (or everything) from a module that ``modules`` may be."""
        return bool(self.imported.get(name, frozenset()) & modules or self.imported.get("*", frozenset()) & modules)

    def names(self, word: str) -> bool:
        """Whether the file mentions ``word`` as a whole name (in code, an import or a comment)."""
        if word not in self._named:
            self._named[word] = (
                bool(word) and re.search(rf"(?<![\w$]){re.escape(word)}(?![\w$])", self.text) is not None
            )
        return self._named[word]


@dataclass(frozen=True)
class Defined:
    """A definition in another file, with what the rules need of it: the names its file answers to as a module;
    whether it sits inside another function (a closure: nothing outside its file calls it by name); for a method, its
    class's direct bases in that file and the classes derived from it anywhere."""

    path: str
    tag: Tag
    modules: frozenset[str]
    bases: frozenset[str] = frozenset()
    derived: frozenset[str] = frozenset()
    nested: bool = False


# Methods every value of a built-in type has (dicts, lists, strings, files, promises, emitters; Go's Stringer and
# error): ``proxies.items()`` is a dict's, not ``Headers.items``, unless the receiver's own name says otherwise.
_COMMON = frozenset(
    """items keys values get update clear copy pop popitem setdefault append extend insert remove index count sort
    reverse add discard join split rsplit strip lstrip rstrip replace startswith endswith format encode decode lower
    upper find read write close flush seek tell readline readlines push shift unshift slice splice map filter reduce
    forEach some every includes indexOf concat entries set has delete then catch finally on once emit off
    removeListener end destroy pipe toString trim startsWith endsWith match test call apply bind String Error""".split()
)


def _normal(name: str) -> str:
    return name.replace("_", "").replace("$", "").lower()


def _receiver_is(receiver: str, classes: tuple[str, ...]) -> bool:
    """Whether a receiver's own name says it holds one of ``classes`` (``self._headers`` for ``Headers``,
    ``req_headers`` too, ``pos`` for ``Position``)."""
    last = _normal(receiver.rsplit(".", 1)[-1])
    return any(
        c and (last == c or last.endswith(c) or (len(last) >= 3 and c.startswith(last)))
        for c in (_normal(name) for name in classes)
    )


def _dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def links(ref: Tag, where: FileView, target: Defined) -> bool:
    """Whether the reference ``ref``, in the file ``where``, can mean the definition ``target``."""
    if target.nested:
        return False
    method = target.tag.kind == "method"
    receiver = ref.receiver
    if _dunder(ref.name):
        # ``super().__init__(...)``, ``x.__eq__``: which class's is meant is not written; only ``Rule.__init__``.
        return method and receiver == target.tag.scope
    if not receiver:
        if method:
            return False
        kind = language(where.path)
        if kind == "go":
            return _folder(where.path) == _folder(target.path)
        if kind in ("java", "rust") and _folder(where.path) == _folder(target.path):
            return True  # a Java package, a Rust module's folder: no import needed
        return where.imports(ref.name, target.modules)
    head = receiver.split(".", 1)[0]
    if receiver == head and head in where.modules:
        if method:
            return target.tag.scope == head
        return head in target.modules
    if not method:
        # ``pkg.Func`` through a name the file binds some other way (``from . import utils``, a Go package of the
        # same name): a function of a module by that name.
        return receiver.rsplit(".", 1)[-1] in target.modules and where.names(receiver.rsplit(".", 1)[-1])
    classes = (target.tag.scope, *target.bases, *target.derived)
    if (
        ref.name in _COMMON
        and receiver not in ("self", "this", "cls", "super()")
        and not _receiver_is(receiver, classes)
    ):
        return False
    return any(where.names(c) for c in classes)
