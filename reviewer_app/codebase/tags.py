"""A file's tags (pure): the functions, methods, classes, interfaces and types it defines, and the calls and base types
it refers to, each with its line, the name of the definition it sits in and, for a reference, what it is called on
(``re`` in ``re.compile(...)``); read with tree-sitter queries for every grammar codebase/scopes.py knows."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any

from reviewer_app.codebase.scopes import grammar_name, language_for, parse

log = logging.getLogger(__name__)

MAX_NAME = 200
MAX_RECEIVER = 120
# The nodes whose child is a member's name, and the field that holds what the member is looked up on.
_MEMBER_OBJECT = {
    "attribute": "object",
    "member_expression": "object",
    "selector_expression": "operand",
    "method_invocation": "object",  # Java
    "field_expression": "value",
    "scoped_identifier": "path",  # Rust: x.f(), Type::f()
}

# One pattern a line: a pattern a grammar's version does not know is dropped on its own (logged), not the whole query.
# ``@def.<kind>`` captures a definition's name, ``@ref.call`` a called name, ``@ref.base`` a base type's name.
_PATTERNS: dict[str, tuple[str, ...]] = {
    "python": (
        "(function_definition name: (identifier) @def.function)",
        "(class_definition name: (identifier) @def.class)",
        "(call function: (identifier) @ref.call)",
        "(call function: (attribute attribute: (identifier) @ref.call))",
        "(module (expression_statement (assignment left: (identifier) @def.constant)))",
        "(class_definition superclasses: (argument_list (identifier) @ref.base))",
        "(class_definition superclasses: (argument_list (attribute attribute: (identifier) @ref.base)))",
    ),
    "javascript": (
        "(function_declaration name: (identifier) @def.function)",
        "(generator_function_declaration name: (identifier) @def.function)",
        "(method_definition name: (property_identifier) @def.method)",
        "(class_declaration name: (identifier) @def.class)",
        "(variable_declarator name: (identifier) @def.function value: [(arrow_function) (function_expression)])",
        # ``self.reset = function reset () {...}``, ``Foo.prototype.bar = () => ...``, ``{ go: function () {...} }``,
        # and each name of ``self.resetOptions = self.reset = function ...``
        "(assignment_expression left: (member_expression property: (property_identifier) @def.function) right: [(function_expression) (arrow_function) (assignment_expression)])",
        "(pair key: (property_identifier) @def.function value: [(function_expression) (arrow_function)])",
        "(program (lexical_declaration (variable_declarator name: (identifier) @def.constant)))",
        "(program (export_statement (lexical_declaration (variable_declarator name: (identifier) @def.constant))))",
        "(call_expression function: (identifier) @ref.call)",
        "(call_expression function: (member_expression property: (property_identifier) @ref.call))",
        "(new_expression constructor: (identifier) @ref.call)",
        "(class_heritage (identifier) @ref.base)",
        "(class_heritage (member_expression property: (property_identifier) @ref.base))",
    ),
    "typescript": (
        "(function_declaration name: (identifier) @def.function)",
        "(generator_function_declaration name: (identifier) @def.function)",
        "(method_definition name: (property_identifier) @def.method)",
        "(method_signature name: (property_identifier) @def.method)",
        "(abstract_method_signature name: (property_identifier) @def.method)",
        "(class_declaration name: (type_identifier) @def.class)",
        "(abstract_class_declaration name: (type_identifier) @def.class)",
        "(interface_declaration name: (type_identifier) @def.interface)",
        "(type_alias_declaration name: (type_identifier) @def.type)",
        "(enum_declaration name: (identifier) @def.type)",
        "(variable_declarator name: (identifier) @def.function value: [(arrow_function) (function_expression)])",
        # ``self.reset = function reset () {...}``, ``Foo.prototype.bar = () => ...``, ``{ go: function () {...} }``,
        # and each name of ``self.resetOptions = self.reset = function ...``
        "(assignment_expression left: (member_expression property: (property_identifier) @def.function) right: [(function_expression) (arrow_function) (assignment_expression)])",
        "(pair key: (property_identifier) @def.function value: [(function_expression) (arrow_function)])",
        "(program (lexical_declaration (variable_declarator name: (identifier) @def.constant)))",
        "(program (export_statement (lexical_declaration (variable_declarator name: (identifier) @def.constant))))",
        "(call_expression function: (identifier) @ref.call)",
        "(call_expression function: (member_expression property: (property_identifier) @ref.call))",
        "(new_expression constructor: (identifier) @ref.call)",
        "(extends_clause value: (identifier) @ref.base)",
        "(implements_clause (type_identifier) @ref.base)",
        "(extends_type_clause type: (type_identifier) @ref.base)",
    ),
    "go": (
        "(function_declaration name: (identifier) @def.function)",
        "(method_declaration name: (field_identifier) @def.method)",
        "(type_spec name: (type_identifier) @def.type)",
        "(method_elem name: (field_identifier) @def.method)",
        "(source_file (const_declaration (const_spec name: (identifier) @def.constant)))",
        "(source_file (var_declaration (var_spec name: (identifier) @def.constant)))",
        "(call_expression function: (identifier) @ref.call)",
        "(call_expression function: (selector_expression field: (field_identifier) @ref.call))",
        "(struct_type (field_declaration_list (field_declaration !name type: (type_identifier) @ref.base)))",
        "(struct_type (field_declaration_list (field_declaration !name type: (pointer_type (type_identifier) @ref.base))))",
        "(interface_type (type_elem (type_identifier) @ref.base))",
    ),
    "java": (
        "(method_declaration name: (identifier) @def.method)",
        "(class_declaration name: (identifier) @def.class)",
        "(record_declaration name: (identifier) @def.class)",
        "(interface_declaration name: (identifier) @def.interface)",
        "(enum_declaration name: (identifier) @def.type)",
        "(method_invocation name: (identifier) @ref.call)",
        "(object_creation_expression type: (type_identifier) @ref.call)",
        "(superclass (type_identifier) @ref.base)",
        "(super_interfaces (type_list (type_identifier) @ref.base))",
        "(extends_interfaces (type_list (type_identifier) @ref.base))",
    ),
    "rust": (
        "(function_item name: (identifier) @def.function)",
        "(function_signature_item name: (identifier) @def.method)",
        "(struct_item name: (type_identifier) @def.type)",
        "(enum_item name: (type_identifier) @def.type)",
        "(trait_item name: (type_identifier) @def.interface)",
        "(type_item name: (type_identifier) @def.type)",
        "(source_file (const_item name: (identifier) @def.constant))",
        "(source_file (static_item name: (identifier) @def.constant))",
        "(call_expression function: (identifier) @ref.call)",
        "(call_expression function: (field_expression field: (field_identifier) @ref.call))",
        "(call_expression function: (scoped_identifier name: (identifier) @ref.call))",
    ),
}
_PATTERNS["tsx"] = _PATTERNS["typescript"]

# The nodes a definition spans (its name's parent, or the wrapper that holds its decorators, export or declaration).
_DEFINITIONS = frozenset(
    {
        "function_definition",
        "class_definition",
        "function_declaration",
        "generator_function_declaration",
        "method_definition",
        "method_signature",
        "abstract_method_signature",
        "class_declaration",
        "abstract_class_declaration",
        "interface_declaration",
        "type_alias_declaration",
        "enum_declaration",
        "variable_declarator",
        "method_declaration",
        "type_spec",
        "method_elem",
        "record_declaration",
        "function_item",
        "function_signature_item",
        "struct_item",
        "enum_item",
        "trait_item",
        "type_item",
    }
)
_WRAPPERS = frozenset(
    {"decorated_definition", "export_statement", "lexical_declaration", "variable_declaration", "type_declaration"}
)
_CLASSES = frozenset(
    {
        "class_definition",
        "class_declaration",
        "abstract_class_declaration",
        "interface_declaration",
        "type_spec",
        "enum_declaration",
        "record_declaration",
        "trait_item",
        "impl_item",  # Rust: a method's owner is the type its impl block is for
    }
)


@dataclass(frozen=True)
class Tag:
    """A definition (``kind`` function, method, class, interface, type, or constant: a module-level name bound to a
    value) spanning ``line``..``end``, or a reference
    (``kind`` call or base) on ``line``. ``scope``: the definition it sits in (a method's class, a call's caller).
    ``receiver``: what a reference is looked up on, as written (``self``, ``re``, ``os.environ``; ``?`` when it is
    longer than a name path), ``""`` for a bare name (``verify(...)``, ``new Store()``)."""

    name: str
    kind: str
    line: int
    end: int
    scope: str = ""
    receiver: str = ""

    @property
    def is_definition(self) -> bool:
        return self.kind not in ("call", "base")


@functools.cache
def _query(grammar: str, suffix: str) -> Any | None:
    """The grammar's tag query, its unknown patterns dropped; None when the grammar is not installed."""
    import tree_sitter

    language = language_for(suffix)
    if language is None:
        return None
    kept: list[str] = []
    for pattern in _PATTERNS.get(grammar, ()):
        try:
            tree_sitter.Query(language, pattern)
        except (tree_sitter.QueryError, ValueError, NameError) as exc:
            log.warning("tag pattern not known to the %s grammar, dropped: %s (%s)", grammar, pattern, exc)
            continue
        kept.append(pattern)
    return tree_sitter.Query(language, "\n".join(kept)) if kept else None


def file_tags(path: str, text: str) -> list[Tag] | None:
    """The tags of ``text`` (the file at ``path``); None when no grammar reads this kind of file."""
    grammar = grammar_name(path)
    if grammar is None:
        return None
    suffix = "." + path.rsplit(".", 1)[-1].lower()
    query = _query(grammar, suffix)
    tree = parse(path, text) if query is not None else None
    if tree is None:
        return None
    import tree_sitter

    tags: list[Tag] = []
    seen: set[tuple[str, int, int]] = set()
    for capture, nodes in tree_sitter.QueryCursor(query).captures(tree.root_node).items():
        kind = capture.split(".", 1)[1]
        for node in nodes:
            name = _text(node)
            if not name or len(name) > MAX_NAME:
                continue
            key = (name, node.start_point.row, node.start_point.column)
            if key in seen:
                continue
            seen.add(key)
            line = node.start_point.row + 1
            if kind == "constant":
                if _is_function_value(node):
                    continue  # ``const f = () => ...``: read as a function
                first, last = _rows(_statement(node))
                tags.append(Tag(name, kind, first, last))
                continue
            if capture.startswith("def."):
                if node.parent is not None and node.parent.type in ("member_expression", "pair"):
                    if _assigned_function(node) is None:
                        continue  # ``module.exports = function ...`` names the module; ``a.x = a.y = 1`` no function
                span = _definition(node)
                first, last = _rows(span)
                owner = _owner(span)
                tags.append(Tag(name, "method" if kind == "function" and owner else kind, first, last, owner))
            else:
                tags.append(Tag(name, kind, line, line, _enclosing_name(node), _receiver(node)))
    tags.sort(key=lambda t: (t.line, t.name))
    return tags


_STATEMENTS = frozenset(
    {
        "expression_statement",
        "lexical_declaration",
        "export_statement",
        "const_declaration",
        "var_declaration",
        "const_item",
        "static_item",
    }
)


def _is_function_value(name: Any) -> bool:
    value = name.parent.child_by_field_name("value") if name.parent is not None else None
    return value is not None and value.type in ("arrow_function", "function_expression")


def _statement(name: Any) -> Any:
    """The whole top-level statement a constant's name sits in (``export const X = ...``, ``X = {...}``)."""
    node, top = name, name
    while node.parent is not None and node.parent.type not in ("module", "program", "source_file"):
        node = node.parent
        if node.type in _STATEMENTS:
            top = node
    return top


def _text(node: Any) -> str:
    raw = node.text
    return raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else ""


def _receiver(name: Any) -> str:
    """What a member reference is looked up on: ``a.b`` of ``a.b.name``, as written when it is a path of names
    (``self``, ``this``, ``super()`` too), else ``?``; ``""`` for a bare name."""
    parent = name.parent
    field = _MEMBER_OBJECT.get(parent.type) if parent is not None else None
    target = parent.child_by_field_name(field) if field else None
    if target is None or target.id == name.id:
        return ""
    text = " ".join(_text(target).split())
    if len(text) <= MAX_RECEIVER and all(part.isidentifier() or part == "super()" for part in text.split(".")):
        return text
    return "?"


def _rows(node: Any) -> tuple[int, int]:
    end = node.end_point.row if node.end_point.column else node.end_point.row - 1
    return node.start_point.row + 1, max(end, node.start_point.row) + 1


def _definition(name: Any) -> Any:
    """The node a definition spans, wrappers (decorators, export, const declaration) included."""
    if _assigned_function(name) is not None:  # the statement or the object's entry that binds it, not what it is in
        node = name.parent
        while node.parent is not None and node.parent.type in ("assignment_expression", "expression_statement"):
            node = node.parent
        return node
    node = name.parent
    while node is not None and node.type not in _DEFINITIONS:
        node = node.parent
    if node is None:
        return name
    while node.parent is not None and node.parent.type in _WRAPPERS:
        node = node.parent
    return node


def _name_of(node: Any) -> str:
    if node.type == "impl_item":  # ``impl Trait for Type<T>``: the type, without its generic arguments
        named = node.child_by_field_name("type")
        return _text(named).split("<", 1)[0].rsplit("::", 1)[-1] if named is not None else ""
    target = node
    if target.type in _WRAPPERS:
        inner = [c for c in target.named_children if c.type in _DEFINITIONS]
        target = inner[0] if inner else target
    named = target.child_by_field_name("name")
    return _text(named) if named is not None else ""


def _owner(span: Any) -> str:
    """The class (or interface, or type) a definition sits in, by name (a Go method's receiver type); '' at top
    level."""
    receiver = span.child_by_field_name("receiver") if span.type == "method_declaration" else None
    if receiver is not None:  # Go: ``func (c *Command) Name()``
        names = [n for n in _walk(receiver) if n.type == "type_identifier"]
        return _text(names[0]) if names else ""
    node = span.parent
    while node is not None:
        if node.type in _CLASSES:
            return _name_of(node)
        node = node.parent
    return ""


def _enclosing_name(node: Any) -> str:
    """The name of the nearest definition around a reference ('' at top level); a base type's is its class."""
    current = node.parent
    while current is not None:
        if current.type in _DEFINITIONS:
            return _name_of(current)
        if current.type in _FUNCTION_VALUES and current.parent is not None:
            bound = _bound_name(current)
            if bound:
                return bound
        current = current.parent
    return ""


_FUNCTION_VALUES = ("function_expression", "arrow_function")


def _assigned_function(name: Any) -> Any | None:
    """JavaScript's function bound to a member or an object's key: the function value itself, when ``name`` is the
    property of ``x.name = function ...`` or the key of ``{name: () => ...}``; else None (and for ``exports``, which
    names the module)."""
    parent = name.parent
    if parent is None or name.type != "property_identifier" or _text(name) == "exports":
        return None
    if parent.type == "pair" and parent.child_by_field_name("key") == name:
        value = parent.child_by_field_name("value")
    elif parent.type == "member_expression" and parent.parent is not None:
        statement = parent.parent
        if statement.type != "assignment_expression" or statement.child_by_field_name("left") != parent:
            return None
        value = statement.child_by_field_name("right")
        while value is not None and value.type == "assignment_expression":  # ``a.x = a.y = function ...``
            value = value.child_by_field_name("right")
    else:
        return None
    return value if value is not None and value.type in _FUNCTION_VALUES else None


def _bound_name(function: Any) -> str:
    """The name a function value is bound to by an assignment to a member or an object's key ('' for neither): the
    name ``_assigned_function`` reads the other way."""
    parent = function.parent
    named = None
    if parent.type == "pair":
        named = parent.child_by_field_name("key")
    elif parent.type == "assignment_expression":
        left = parent.child_by_field_name("left")
        named = left.child_by_field_name("property") if left is not None and left.type == "member_expression" else None
    return _text(named) if named is not None and _assigned_function(named) == function else ""


def _walk(node: Any) -> list[Any]:
    out, stack = [], [node]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(reversed(current.named_children))
    return out
