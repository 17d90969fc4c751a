"""`--activation` and `--sweep`: ranking constants overridden for a retrieval run, read
from the command line and checked against memories.recall.ActivationConfig."""

import dataclasses
import itertools
import json
from typing import Any


def activation_overrides(pairs: list[str]) -> dict[str, Any]:
    """`--activation NAME=VALUE` pairs as TAPROOT_ACTIVATION overrides, each value read as
    JSON when it can be (numbers), else kept as text (a history form's name)."""
    from memories.recall import ActivationConfig

    defaults = ActivationConfig()
    names = {f.name for f in dataclasses.fields(ActivationConfig)}
    overrides: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = (part.strip() for part in pair.partition("="))
        if not sep or name not in names:
            raise SystemExit(
                f"--activation {pair}: give NAME=VALUE, NAME one of {', '.join(sorted(names))}"
            )
        try:
            overrides[name] = json.loads(value)
        except json.JSONDecodeError:
            overrides[name] = value
        wanted = type(getattr(defaults, name))
        number = wanted in (int, float) and type(overrides[name]) in (int, float)
        if not number and type(overrides[name]) is not wanted:
            raise SystemExit(f"--activation {pair}: {name} takes a {wanted.__name__}")
    try:
        ActivationConfig(**overrides)
    except ValueError as refused:
        raise SystemExit(f"--activation: {refused}") from None
    return overrides


def sweep_overrides(options: list[str]) -> list[dict[str, Any]]:
    """`--sweep NAME=V1,V2` options as every combination of their values, each checked as
    `--activation` is."""
    axes = []
    for option in options:
        names, sep, values = option.partition("=")
        if not sep or not values:
            raise SystemExit(f"--sweep {option}: give NAME=V1,V2,… or NAME/NAME=V/V,V/V,…")
        axis = []
        for value in values.split(","):
            parts = value.split("/")
            if len(parts) != len(names.split("/")):
                raise SystemExit(f"--sweep {option}: each value needs one part per name")
            axis.append(
                [f"{n.strip()}={v.strip()}" for n, v in zip(names.split("/"), parts, strict=True)]
            )
        axes.append(axis)
    return (
        [
            activation_overrides([pair for group in combination for pair in group])
            for combination in itertools.product(*axes)
        ]
        if axes
        else []
    )
