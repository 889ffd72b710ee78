"""What a GraphQL query costs the caller, as GitHub documents it ("Rate limits and query limits for the GraphQL
API"): every connection must say ``first`` or ``last`` (1 to 100); a query may ask for at most 500,000 nodes
(each connection's page size times the pages of its parents); its cost in points is the number of requests needed
to fill each connection, assuming every one reaches its ``first``/``last``, divided by 100 and rounded, at least 1.
A mutation costs 1 point."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLSchema,
    InlineFragmentNode,
    OperationDefinitionNode,
    SelectionSetNode,
    get_named_type,
    value_from_ast_untyped,
)
from graphql.language import DocumentNode

MAX_NODES = 500_000
MAX_PAGE = 100


class QueryLimitError(Exception):
    """The query breaks one of GitHub's limits: GitHub answers with this message (and runs nothing)."""


@dataclass(frozen=True)
class Cost:
    points: int
    nodes: int


def query_cost(schema: GraphQLSchema, document: DocumentNode, variables: dict[str, Any]) -> Cost:
    """The cost and node count of the document's (first) operation; raises QueryLimitError past a limit."""
    fragments = {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}
    operation = next(d for d in document.definitions if isinstance(d, OperationDefinitionNode))
    if operation.operation.value == "mutation":
        return Cost(points=1, nodes=0)
    root = schema.query_type
    assert root is not None
    requests, nodes = _walk(schema, root, operation.selection_set, 1, fragments, variables)
    if nodes > MAX_NODES:
        raise QueryLimitError(
            f"By the time this query traverses to the {nodes} nodes, it requests more than the {MAX_NODES} node limit."
        )
    return Cost(points=max(1, round(requests / 100)), nodes=nodes)


def _walk(
    schema: GraphQLSchema,
    parent: Any,
    selections: SelectionSetNode | None,
    multiplier: int,
    fragments: dict[str, FragmentDefinitionNode],
    variables: dict[str, Any],
) -> tuple[int, int]:
    """(requests, nodes) of a selection set reached ``multiplier`` times."""
    requests = nodes = 0
    for selection in selections.selections if selections else ():
        if isinstance(selection, FragmentSpreadNode):
            fragment = fragments[selection.name.value]
            kind = schema.get_type(fragment.type_condition.name.value)
            r, n = _walk(schema, kind, fragment.selection_set, multiplier, fragments, variables)
        elif isinstance(selection, InlineFragmentNode):
            kind = schema.get_type(selection.type_condition.name.value) if selection.type_condition else parent
            r, n = _walk(schema, kind, selection.selection_set, multiplier, fragments, variables)
        else:
            assert isinstance(selection, FieldNode)
            r, n = _field(schema, parent, selection, multiplier, fragments, variables)
        requests, nodes = requests + r, nodes + n
    return requests, nodes


def _field(
    schema: GraphQLSchema,
    parent: Any,
    field: FieldNode,
    multiplier: int,
    fragments: dict[str, FragmentDefinitionNode],
    variables: dict[str, Any],
) -> tuple[int, int]:
    definition = getattr(parent, "fields", {}).get(field.name.value)
    if definition is None:  # __typename and the like
        return 0, 0
    kind = get_named_type(definition.type)
    if not kind.name.endswith("Connection"):
        return _walk(schema, kind, field.selection_set, multiplier, fragments, variables)
    args = {a.name.value: value_from_ast_untyped(a.value, variables) for a in field.arguments or ()}
    size = args.get("first") if args.get("first") is not None else args.get("last")
    if size is None:
        raise QueryLimitError(
            f"You must provide a `first` or `last` value to properly paginate the `{field.name.value}` connection."
        )
    if not isinstance(size, int) or not 1 <= size <= MAX_PAGE:
        raise QueryLimitError(
            f"Requesting {size} records on the `{field.name.value}` connection exceeds the `first` limit of {MAX_PAGE} records."
        )
    r, n = _walk(schema, kind, field.selection_set, multiplier * size, fragments, variables)
    return multiplier + r, multiplier * size + n
