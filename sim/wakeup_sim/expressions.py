"""DynamoDB's condition and update expressions, evaluated on an item in memory.

The simulator's table (`wakeup_sim.dynamodb`) answers `DynamoStore`'s own requests, so every guarded
write is written once, as the expression DynamoDB evaluates; this module gives those expressions
DynamoDB's meaning ("Condition and filter expressions, operators, and functions" and "Using update
expressions", DynamoDB developer guide:
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.OperatorsAndFunctions.html,
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.UpdateExpressions.html):

- a comparison with an attribute the item lacks, or of values of two types, is false (`<>`: true,
  as moto, which the contract suite checks it against, answers);
- `SET`'s operands are all read from the item as it was before the update (`SET a = b, b = a`
  swaps), a path that names a missing attribute outside `if_not_exists` is refused, and so are two
  actions on one attribute ("Two document paths overlap");
- every `:value` and `#name` given must be used, and every one used given.

Top-level attributes only (no `a.b`, no `a[0]`): any other syntax raises `NotImplementedError`, so a
new expression the table does not understand is seen at once, not evaluated wrongly. Each text is
parsed once (`condition`, `update`), into a function of the item and the values.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

Item = dict[str, Any]
Values = dict[str, Any]


class ExpressionError(Exception):
    """DynamoDB's `ValidationException` for an expression: its message is DynamoDB's kind of message."""


class _Missing:
    """The value of an attribute the item lacks."""


MISSING = _Missing()
_TOKEN = re.compile(r"\s*(<>|<=|>=|[=<>(),+\-]|[#:]?[A-Za-z_][A-Za-z0-9_]*)")
_COMPARATORS = ("=", "<>", "<", "<=", ">", ">=")
Operand = Callable[[Item, Values], Any]
Condition = Callable[[Item, Values], bool]


def _tokens(text: str) -> list[str]:
    tokens, position = [], 0
    text = text.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise NotImplementedError(f"the simulated table does not read {text[position:]!r} in {text!r}")
        tokens.append(match[1])
        position = match.end()
    return tokens


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "BOOL"
    if isinstance(value, int | Decimal):
        return "N"
    if isinstance(value, str):
        return "S"
    if isinstance(value, bytes):
        return "B"
    return type(value).__name__


def _compare(operator: str, left: Any, right: Any) -> bool:
    if left is MISSING or right is MISSING or _kind(left) != _kind(right):
        return operator == "<>"
    if operator == "=":
        return bool(left == right)
    if operator == "<>":
        return bool(left != right)
    if operator == "<":
        return bool(left < right)
    if operator == "<=":
        return bool(left <= right)
    if operator == ">":
        return bool(left > right)
    return bool(left >= right)


@dataclass
class _Parser:
    """One expression's tokens, read left to right; `names` and `values` collect what it uses."""

    tokens: list[str]
    text: str
    position: int = 0

    def __post_init__(self) -> None:
        self.names: set[str] = set()
        self.values: set[str] = set()

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token.upper() != expected):
            raise NotImplementedError(f"the simulated table expected {expected or 'more'} in {self.text!r}")
        self.position += 1
        return token

    def at(self, keyword: str) -> bool:
        token = self.peek()
        return token is not None and token.upper() == keyword

    # -- operands ----------------------------------------------------------------------------

    def name(self) -> str:
        """A top-level attribute's name as written (`#n` resolved when evaluated)."""
        token = self.take()
        if token.startswith(":") or not re.fullmatch(r"#?[A-Za-z_][A-Za-z0-9_]*", token):
            raise NotImplementedError(f"the simulated table reads no path {token!r} in {self.text!r}")
        if token.startswith("#"):
            self.names.add(token)
        return token

    def operand(self) -> Operand:
        token = self.peek()
        if token is None:
            raise NotImplementedError(f"an operand is missing in {self.text!r}")
        if token.startswith(":"):
            self.take()
            self.values.add(token)
            return lambda item, values: values[token]
        if token.lower() == "if_not_exists":
            self.take()
            self.take("(")
            path = self.name()
            self.take(",")
            default = self.operand()
            self.take(")")

            def if_not_exists(item: Item, values: Values) -> Any:
                value = item.get(values.get(path, path), MISSING)
                return default(item, values) if value is MISSING else value

            return if_not_exists
        if token.lower() == "size":
            self.take()
            self.take("(")
            path = self.name()
            self.take(")")

            def size(item: Item, values: Values) -> Any:
                value = item.get(values.get(path, path), MISSING)
                if isinstance(value, str | bytes | list | dict | set):
                    return Decimal(len(value.encode() if isinstance(value, str) else value))
                return MISSING

            return size
        path = self.name()
        return lambda item, values: item.get(values.get(path, path), MISSING)

    # -- conditions --------------------------------------------------------------------------

    def condition(self) -> Condition:
        left = self.conjunction()
        while self.at("OR"):
            self.take()
            left = _either(left, self.conjunction())
        return left

    def conjunction(self) -> Condition:
        left = self.negation()
        while self.at("AND"):
            self.take()
            left = _both(left, self.negation())
        return left

    def negation(self) -> Condition:
        if self.at("NOT"):
            self.take()
            inner = self.negation()
            return lambda item, values: not inner(item, values)
        return self.predicate()

    def predicate(self) -> Condition:
        token = self.peek()
        if token == "(":
            self.take()
            inner = self.condition()
            self.take(")")
            return inner
        if token is not None and token.lower() in ("attribute_exists", "attribute_not_exists", "begins_with"):
            function = self.take().lower()
            self.take("(")
            path = self.name()
            if function == "begins_with":
                self.take(",")
                prefix = self.operand()
                self.take(")")

                def begins_with(item: Item, values: Values) -> bool:
                    value, start = item.get(values.get(path, path), MISSING), prefix(item, values)
                    return isinstance(value, str) and isinstance(start, str) and value.startswith(start)

                return begins_with
            self.take(")")
            exists = function == "attribute_exists"
            return lambda item, values: (values.get(path, path) in item) is exists
        left = self.operand()
        if self.at("BETWEEN"):
            self.take()
            low = self.operand()
            self.take("AND")
            high = self.operand()
            return lambda item, values: (
                _compare(">=", left(item, values), low(item, values))
                and _compare("<=", left(item, values), high(item, values))
            )
        operator = self.take()
        if operator not in _COMPARATORS:
            raise NotImplementedError(f"the simulated table reads no operator {operator!r} in {self.text!r}")
        right = self.operand()
        return lambda item, values: _compare(operator, left(item, values), right(item, values))

    def done(self) -> None:
        if self.peek() is not None:
            raise NotImplementedError(f"the simulated table does not read {self.peek()!r} in {self.text!r}")


def _either(a: Condition, b: Condition) -> Condition:
    return lambda item, values: a(item, values) or b(item, values)


def _both(a: Condition, b: Condition) -> Condition:
    return lambda item, values: a(item, values) and b(item, values)


@dataclass(frozen=True)
class Parsed:
    """An expression's function, with the `#names` and `:values` it uses."""

    names: frozenset[str]
    values: frozenset[str]


@dataclass(frozen=True)
class ParsedCondition(Parsed):
    holds: Condition


@dataclass(frozen=True)
class ParsedUpdate(Parsed):
    """`SET` actions (an attribute and the value's function) and `REMOVE`d attributes, as written."""

    sets: tuple[tuple[str, Operand], ...]
    removes: tuple[str, ...]


_conditions: dict[str, ParsedCondition] = {}
_updates: dict[str, ParsedUpdate] = {}


def condition(text: str) -> ParsedCondition:
    """A condition (or key condition) expression, parsed once."""
    parsed = _conditions.get(text)
    if parsed is None:
        parser = _Parser(_tokens(text), text)
        holds = parser.condition()
        parser.done()
        parsed = ParsedCondition(frozenset(parser.names), frozenset(parser.values), holds)
        _conditions[text] = parsed
    return parsed


def update(text: str) -> ParsedUpdate:
    """An update expression (`SET` and `REMOVE` clauses), parsed once."""
    parsed = _updates.get(text)
    if parsed is None:
        parser = _Parser(_tokens(text), text)
        sets: list[tuple[str, Operand]] = []
        removes: list[str] = []
        while parser.peek() is not None:
            clause = parser.take().upper()
            if clause not in ("SET", "REMOVE"):
                raise NotImplementedError(f"the simulated table reads no {clause} clause in {text!r}")
            while True:
                path = parser.name()
                if clause == "REMOVE":
                    removes.append(path)
                else:
                    parser.take("=")
                    sets.append((path, _value(parser)))
                if parser.peek() != ",":
                    break
                parser.take()
        parsed = ParsedUpdate(frozenset(parser.names), frozenset(parser.values), tuple(sets), tuple(removes))
        _updates[text] = parsed
    return parsed


def _value(parser: _Parser) -> Operand:
    """A `SET` action's value: an operand, or two joined by `+` or `-` (numbers only)."""
    left = parser.operand()
    if parser.peek() not in ("+", "-"):
        return _present(left)
    sign = parser.take()
    right = parser.operand()

    def arithmetic(item: Item, values: Values) -> Any:
        a, b = _present(left)(item, values), _present(right)(item, values)
        if _kind(a) != "N" or _kind(b) != "N":
            raise ExpressionError("An operand in the update expression has an incorrect data type")
        return Decimal(a) + Decimal(b) if sign == "+" else Decimal(a) - Decimal(b)

    return arithmetic


def _present(operand: Operand) -> Operand:
    def value(item: Item, values: Values) -> Any:
        found = operand(item, values)
        if found is MISSING:
            raise ExpressionError("The provided expression refers to an attribute that does not exist in the item")
        return found

    return value


_checked: set[tuple[object, ...]] = set()


def check_used(names: dict[str, str], values: Values, *expressions: Parsed) -> None:
    """Refuses, as DynamoDB does, a `#name` or `:value` given and unused, or used and not given.
    A request's shape that passed once passes again (its expressions and the keys it gives)."""
    shape = (*(id(e) for e in expressions), *names, "|", *values)
    if shape in _checked:
        return
    _check_used(names, values, *expressions)
    _checked.add(shape)


def _check_used(names: dict[str, str], values: Values, *expressions: Parsed) -> None:
    used_names = set().union(*(e.names for e in expressions))
    used_values = set().union(*(e.values for e in expressions))
    if used_values - set(values):
        raise ExpressionError(
            f"An expression attribute value used in expression is not defined: {used_values - set(values)}"
        )
    if set(values) - used_values:
        raise ExpressionError(
            f"Value provided in ExpressionAttributeValues unused in expressions: {set(values) - used_values}"
        )
    if used_names - set(names):
        raise ExpressionError(
            f"An expression attribute name used in the document path is not defined: {used_names - set(names)}"
        )
    if set(names) - used_names:
        raise ExpressionError(
            f"Value provided in ExpressionAttributeNames unused in expressions: {set(names) - used_names}"
        )


def holds(parsed: ParsedCondition, item: Item | None, scope: Values) -> bool:
    """Whether the condition holds on `item` (None: no item); `scope` maps `:values` and `#names`."""
    return parsed.holds(item if item is not None else {}, scope)


def apply(parsed: ParsedUpdate, item: Item, scope: Values) -> Item:
    """The item the update makes of `item` (a new dict; `item` is left as it is)."""
    resolved = [(str(scope.get(path, path)), value(item, scope)) for path, value in parsed.sets]
    removed = [str(scope.get(path, path)) for path in parsed.removes]
    touched = [name for name, _ in resolved] + removed
    if len(set(touched)) != len(touched):
        raise ExpressionError("Invalid UpdateExpression: Two document paths overlap")
    new = dict(item)
    for name, value in resolved:
        new[name] = value
    for name in removed:
        new.pop(name, None)
    return new
