"""moto's DynamoDB expressions, each text read once where moto reads it on every request.

Conditions:

- moto lexes each condition expression (`ConditionExpression`, `FilterExpression`) anew on every
  request, compiling its six patterns for each token, a share of moto's CPU under a burst of
  registrations that grows with the expressions' length. The tokens depend on the expression's
  text alone, and moto's later steps build new nodes from them rather than change them, so each
  text is lexed once (up to 1,024 texts).
- moto parses a write's condition twice in one request (its handler, for the names and values it
  uses; its backend, to check it), with the same text and the very same names and values objects.
  The second parse in the thread takes the first's tree when all three are the same. Only within
  the request: the tree holds the request's values, which the write may then store in an item,
  and a later write change in place.

Update expressions: moto parses an `UpdateItem`'s `UpdateExpression` twice per request (its
handler, for the names and values it uses; its backend, to apply it), and its validator deep-copies
the parsed tree before changing it: with the tree's walks, a large share of moto's CPU for a
delivered wake, whose two writes each set a dozen attributes (docs/benchmark.md, "The local
stack").

- A text's tree depends on the text alone: it is parsed once (a text moto refuses raises each
  time, as moto's does) and every caller is given that one tree. moto only reads the tree it
  parses (its handler looks for the names and values in it); the one step that changes a tree,
  the validator's, changes a copy it makes first. A test holds moto's validator and executor to
  leaving the tree they are given as it was (tests/local/test_local_moto_fixes.py).
- The validator's copy of the tree is made by pickle, which copies what `copy.deepcopy` copies
  (the same objects, cycles and shared references) without deepcopy's per-object memo and
  dispatch in Python: the tree is plain objects (nodes, tokens, strings) until the validator puts
  the item's values in its copy. A kept tree's copy is unpickled from the bytes pickled once.
- Three of the validator's walks read only the expression's text, its names and the table's key:
  the count of each kind of clause, whether two actions' paths overlap (moto makes these two at
  every nested `UpdateExpression` node, each searching the whole subtree below it again, so their
  work grows with the square of the actions), and whether an action sets a key attribute. What they
  find is the text's with those names on a table with that key: on a kept tree they are made until
  they pass once with those names and that key, and left out after (a text they refuse is refused
  each time, as moto's is).
- Each of the validator's ten walks asks its class, at every node, which node types it processes
  (`nodes_to_be_processed`), which builds a dict of bound methods to read its keys: the types
  are the class's own, so each class is asked once.
- The walks, and the search for clauses (`find_clauses`, three times over from each nested
  `UpdateExpression` node), ask of each node whether its type is a `Node`, an `Expression`, a
  function, or one the walk processes: `isinstance` through `ABCMeta`, two thousand times an
  update. The answers depend on the node's type alone: each is worked out once per type.
"""

from __future__ import annotations

import copy
import functools
import pickle
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from moto.dynamodb.parsing.ast_nodes import (  # type: ignore[attr-defined]  # moto's untyped module
    Expression,
    Node,
    UpdateExpressionFunction,
)

_LEXED_TEXTS = 1024
_lexed: dict[str, tuple[Any, ...]] = {}


def lexing_each_text_once(lex: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """moto's `ConditionExpressionParser._lex_condition_expression`, its tokens kept by text."""

    @functools.wraps(lex)
    def lexed(self: Any) -> Any:
        text = self.condition_expression
        nodes = _lexed.get(text)
        if nodes is None:
            nodes = tuple(lex(self))  # a text moto cannot lex raises, each time, as moto's does
            if len(_lexed) < _LEXED_TEXTS:
                _lexed[text] = nodes
        return deque(nodes)

    return lexed


# The last condition each thread parsed: its text, the very names and values it was parsed with, its
# tree, and the names and values it found.
_last_condition = threading.local()


def parsing_each_condition_once(parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """moto's `ConditionExpressionParser.parse`, whose tree a second parse in the thread takes when
    it is of the same text with the very same names and values (the objects, not equal ones): moto's
    backend parsing what its handler parsed in the same request."""

    @functools.wraps(parse)
    def parsed(self: Any) -> Any:
        names, values = self.expression_attribute_names, self.expression_attribute_values
        last = getattr(_last_condition, "parsed", None)
        if last is not None and last[0] == self.condition_expression and last[1] is names and last[2] is values:
            found_names, found_values, tree = last[3:]
        else:
            tree = parse(self)  # a condition moto refuses raises, each time, as moto's does
            found_names, found_values = list(self.expr_attr_names_found), list(self.expr_attr_values_found)
            # The objects are kept with it, so no later request's can take their place in memory.
            _last_condition.parsed = (self.condition_expression, names, values, found_names, found_values, tree)
            return tree
        self.expr_attr_names_found.extend(found_names)
        self.expr_attr_values_found.extend(found_values)
        return tree

    return parsed


_PARSED_TEXTS = 1024
# Each text's one tree, and the tree pickled: the validator's copies of it are unpickled from that.
_parsed: dict[str, Any] = {}
_pickled: dict[int, tuple[Any, bytes]] = {}  # by the tree's id, the tree held so its id stays its own


def parsing_each_text_once(make: Callable[[str], Any]) -> Callable[[str], Any]:
    """moto's `UpdateExpressionParser.make` (a class method, given unbound), its trees kept by text."""

    @functools.wraps(make)
    def parsed(expression: str) -> Any:
        tree = _parsed.get(expression)
        if tree is None:
            tree = make(expression)
            if len(_parsed) < _PARSED_TEXTS:
                _pickled[id(tree)] = (tree, pickle.dumps(tree, pickle.HIGHEST_PROTOCOL))
                _parsed[expression] = tree
        return tree

    return parsed


def copied(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """`copy.deepcopy`, by pickle for a tree of nodes."""
    if isinstance(value, Node) and memo is None:
        kept = _pickled.get(id(value))
        if kept is not None and kept[0] is value:
            return pickle.loads(kept[1])
        return pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))
    return copy.deepcopy(value, memo)


_TEXT_CHECKS = 4096
# The kept trees (by id), names (as sorted pairs) and tables' key attributes whose text-only walks
# have passed.
_text_checked: set[tuple[int, tuple[tuple[str, str], ...], tuple[str, ...]]] = set()


def text_walks_once(
    text_only: tuple[type, ...],
) -> Callable[[Callable[[Any], Any]], Callable[[Any], Any]]:
    """Wraps moto's `Validator.validate` so that the walks of `text_only` types that lead its walks
    are made on a kept tree until they pass once with the request's names and table's key."""

    def wrap(validate: Callable[[Any], Any]) -> Callable[[Any], Any]:
        @functools.wraps(validate)
        def validated(self: Any) -> Any:
            source = getattr(self, "wakeup_source_tree", None)
            kept = _pickled.get(id(source))
            if kept is None or kept[0] is not source:
                return validate(self)  # a tree not kept: every walk, as moto makes them
            names = tuple(sorted((self.expression_attribute_names or {}).items()))
            key = (id(source), names, tuple(self.table.table_key_attrs))
            walks = self.processors
            if key in _text_checked:  # left out only where they lead: the other walks' order kept
                leading = next((at for at, walk in enumerate(walks) if not isinstance(walk, text_only)), len(walks))
                self.processors = walks[leading:]
            try:
                validated_tree = validate(self)
            finally:
                self.processors = walks
            if len(_text_checked) < _TEXT_CHECKS:
                _text_checked.add(key)  # the walks raised nothing
            return validated_tree

        return validated

    return wrap


def keeping_the_source_tree(init: Callable[..., None]) -> Callable[..., None]:
    """Wraps moto's `Validator.__init__`, which copies the tree it is given, to keep that tree."""

    @functools.wraps(init)
    def initialised(self: Any, expression: Any, *args: Any, **kwargs: Any) -> None:
        init(self, expression, *args, **kwargs)
        self.wakeup_source_tree = expression

    return initialised


_node_types: dict[type, tuple[type, ...]] = {}


def node_types_once(nodes_to_be_processed: Callable[[Any], tuple[type, ...]]) -> Callable[[Any], tuple[type, ...]]:
    """moto's `DepthFirstTraverser.nodes_to_be_processed`, asked once per class (a subclass that
    has its own keeps it)."""

    @functools.wraps(nodes_to_be_processed)
    def node_types(self: Any) -> tuple[type, ...]:
        types = _node_types.get(type(self))
        if types is None:
            types = _node_types[type(self)] = nodes_to_be_processed(self)
        return types

    return node_types


# What each node type is, worked out once: a `Node`, one whose children hold clauses, and one each
# walk processes (by the walk's node types).
_nodes: dict[type, bool] = {}
_clause_holders: dict[type, bool] = {}
_processed: dict[tuple[type, tuple[type, ...]], bool] = {}


def _is_node(kind: type) -> bool:
    answer = _nodes.get(kind)
    if answer is None:
        answer = _nodes[kind] = issubclass(kind, Node)
    return answer


def find_clauses(self: Any, clause_types: list[type]) -> list[Any]:
    """moto's `Node.find_clauses` (the clauses of those types among the node's descendants, in
    order, not looking inside one found), with each type's answers worked out once."""
    clauses = []
    for child in self.children or []:
        kind = type(child)
        if kind in clause_types:
            clauses.append(child)
            continue
        holds = _clause_holders.get(kind)
        if holds is None:
            holds = _clause_holders[kind] = issubclass(kind, (Expression, UpdateExpressionFunction))
        if holds:
            clauses.extend(child.find_clauses(clause_types))
    return clauses


def traverse_node_recursively(self: Any, node: Any, child_id: int = -1) -> Any:
    """moto's `DepthFirstTraverser.traverse_node_recursively` (children first, each after the
    walk's hook; then the node, if the walk processes its type, replaced in its parent by what the
    walk makes of it), with the walk's node types read once a walk and each type's answers worked
    out once. (No walk of moto's has a traversal of its own, which this would pass over.)"""
    return _walk(node, child_id, self.nodes_to_be_processed(), self.pre_processing_of_child, self.process)


def _walk(
    node: Any,
    child_id: int,
    node_types: tuple[type, ...],
    before_child: Callable[[Any, int], None],
    process: Callable[[Any], Any],
) -> Any:
    kind = type(node)
    if not _is_node(kind):
        return node
    parent_node = node.parent
    if node.children is not None:
        for index, child in enumerate(node.children):
            before_child(node, index)
            _walk(child, index, node_types, before_child, process)
    processed = _processed.get((kind, node_types))
    if processed is None:
        processed = _processed[(kind, node_types)] = issubclass(kind, node_types)
    if processed:
        node = process(node)
        node.parent = parent_node
        if parent_node:
            parent_node.children[child_id] = node
    return node
