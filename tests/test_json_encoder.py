"""vmtune's JSON writer is json.dumps(indent=2) byte for byte, with lone surrogates (undecodable
file-name bytes) shown as \\xNN: the JSON and SARIF contracts (docs/output.md) rest on it."""

from __future__ import annotations

import json
import random

import pytest

from vmtune.escape import unicode_clean
from vmtune.report.jsonout import dumps

ALPHABET = ["a", "Z", " ", "\"", "\\", "/", "\n", "\t", "\x1b", "\x7f", "\u009b", "é", "\u202e", "\u2028", "€",
            "\U0001f600", "\udce9", "\udc80", "{", "]", ":", ","]


def _reference(value: object) -> str:
    def clean(v: object) -> object:
        if isinstance(v, str):
            return unicode_clean(v)
        if isinstance(v, dict):
            return {clean(k): clean(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [clean(x) for x in v]
        return v

    return json.dumps(clean(value), indent=2) + "\n"


def _document(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(9 if depth < 5 else 7)
    if kind == 0:
        return "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(12)))
    if kind == 1:
        return rng.choice([0, -1, 7, 2**70, -(2**64)])
    if kind == 2:
        return rng.choice([0.0, -0.5, 1e300, 1.5e-7, float("inf"), float("-inf"), 3.141592653589793])
    if kind in (3, 4):
        return rng.choice([None, True, False])
    if kind in (5, 6):
        return ""
    if kind == 7:
        keys = [rng.choice([_document(rng, 5) if rng.random() < 0.8 else "", 3, 2.5, True, None])
                for _ in range(rng.randrange(5))]
        return {k if not isinstance(k, list | dict) else str(k): _document(rng, depth + 1) for k in keys}
    items = [_document(rng, depth + 1) for _ in range(rng.randrange(5))]
    return tuple(items) if rng.random() < 0.2 else items


@pytest.mark.parametrize("seed", range(40))
def test_the_writer_is_json_dumps_with_indent_2(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(50):
        document = _document(rng)
        assert dumps(document) == _reference(document)


def test_nan_is_written_as_json_dumps_writes_it() -> None:
    assert dumps({"x": [float("nan")]}) == _reference({"x": [float("nan")]})


def test_what_json_cannot_write_is_an_error_as_in_json_dumps() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps({"x": object()})
