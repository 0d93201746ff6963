"""A deployment's parameters, given as `sam deploy --parameter-overrides` takes them, checked as
CloudFormation checks them before it creates or changes anything.

"Parameters" (CloudFormation template reference): a value must be of the parameter's `Type`, one of
its `AllowedValues`, match its `AllowedPattern` whole, and lie within `MinValue`/`MaxValue` and
`MinLength`/`MaxLength`; then every rule of the template's `Rules` whose `RuleCondition` holds must
have each `Assert` true ("Rules", rule functions: `Fn::Equals`, `Fn::Not`, `Fn::And`, `Fn::Or`,
`Fn::Contains`). A name the template does not declare is refused, as `sam deploy` refuses it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from wakeup_awsfacts.template import Template


class ParameterError(ValueError):
    """Raised when an override names no parameter of the template, or gives a value it refuses."""


def parse(overrides: Iterable[str]) -> dict[str, str]:
    """`Key=Value` items (as `--parameter-overrides` and samconfig.toml's `parameter_overrides`
    write them; `ParameterKey=K,ParameterValue=V` too) into a mapping."""
    parsed: dict[str, str] = {}
    for item in overrides:
        long_form = re.fullmatch(r"ParameterKey=([^,]+),ParameterValue=(.*)", item)
        key, sep, value = (long_form.group(1), "=", long_form.group(2)) if long_form else item.partition("=")
        if not sep or not key:
            raise ParameterError(f"{item!r} is not Key=Value (as sam deploy --parameter-overrides takes them)")
        parsed[key] = value
    return parsed


def check(template: Template, overrides: Mapping[str, str]) -> dict[str, str]:
    """The template's parameters with `overrides` applied; raises `ParameterError` with the reason
    CloudFormation would give for an unknown name or a refused value."""
    declared = template.parameters
    unknown = sorted(set(overrides) - set(declared))
    if unknown:
        raise ParameterError(
            f"template.yaml has no parameter {', '.join(unknown)}: it declares {', '.join(sorted(declared))}"
        )
    values: dict[str, str] = {}
    for name, definition in declared.items():
        if name in overrides:
            value = overrides[name]
            _check_value(name, definition, value)
        elif "Default" in definition:
            value = str(definition["Default"])
        else:
            raise ParameterError(f"{name} has no default in template.yaml: give it a value")
        values[name] = value
    for rule_name, rule in (template.document.get("Rules") or {}).items():
        if "RuleCondition" in rule and not _evaluate(rule["RuleCondition"], values):
            continue
        for assertion in rule.get("Assertions", []):
            if not _evaluate(assertion["Assert"], values):
                reason = assertion.get("AssertDescription", f"the template's rule {rule_name} refuses these values")
                raise ParameterError(reason)
    return values


def _check_value(name: str, definition: Mapping[str, Any], value: str) -> None:
    kind = str(definition.get("Type", "String"))
    if kind == "Number":
        try:
            number = float(value)
        except ValueError:
            raise ParameterError(f"{name} must be a number, not {value!r}") from None
        low, high = definition.get("MinValue"), definition.get("MaxValue")
        if low is not None and number < float(low):
            raise ParameterError(f"{name} must be at least {low}, not {value}")
        if high is not None and number > float(high):
            raise ParameterError(f"{name} must be at most {high}, not {value}")
    allowed = definition.get("AllowedValues")
    if allowed is not None and not any(_same(value, choice, kind) for choice in allowed):
        raise ParameterError(f"{name} must be one of {', '.join(str(c) for c in allowed)}, not {value!r}")
    pattern = definition.get("AllowedPattern")
    if pattern is not None and re.fullmatch(str(pattern), value) is None:
        raise ParameterError(f"{name} must match {pattern}, not {value!r}")
    shortest, longest = definition.get("MinLength"), definition.get("MaxLength")
    if shortest is not None and len(value) < int(shortest):
        raise ParameterError(f"{name} must be at least {shortest} characters long")
    if longest is not None and len(value) > int(longest):
        raise ParameterError(f"{name} must be at most {longest} characters long")


def _same(value: str, choice: Any, kind: str) -> bool:
    if kind == "Number":
        try:
            return float(value) == float(choice)
        except ValueError:
            return False
    return value == str(choice)


def _evaluate(expression: Any, values: Mapping[str, str]) -> Any:
    """A rule function's value: strings and lists as they are, `Ref` a parameter's value."""
    if isinstance(expression, list):
        return [_evaluate(item, values) for item in expression]
    if not isinstance(expression, dict):
        return str(expression)
    ((function, argument),) = expression.items()
    if function == "Ref":
        return values[str(argument)]
    arguments = _evaluate(argument, values)
    if function == "Fn::Equals":
        return arguments[0] == arguments[1]
    if function == "Fn::Not":
        return not arguments[0]
    if function == "Fn::And":
        return all(arguments)
    if function == "Fn::Or":
        return any(arguments)
    if function == "Fn::Contains":
        return arguments[1] in arguments[0]
    raise ParameterError(f"the template's Rules use {function}, which this check cannot evaluate")
