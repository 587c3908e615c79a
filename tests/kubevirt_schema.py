"""Validate a KubeVirt manifest against KubeVirt's own OpenAPI definitions (tests only).

fixtures/stacks/kubevirt/schema/kubevirt-openapi.json holds the definitions of KubeVirt's
swagger.json (d923fdb) reachable from the kinds vmtune reads (extract.py says how). The swagger
document has no "additionalProperties" on KubeVirt's objects: virt-api's own schema check
(pkg/util/webhooks ValidateSchema) accepts unknown fields, and it is the API server that refuses
them (the CRD's structural schema; kubectl's default --validate=strict says "unknown field").
`validate(..., strict=True)` (the default) models that: every object definition with properties
refuses other keys. `strict=False` checks the swagger as it is (types, required fields, enums).
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA = Path(__file__).parent.parent / "fixtures" / "stacks" / "kubevirt" / "schema" / "kubevirt-openapi.json"


class ManifestError(ValueError):
    """The manifest does not fit KubeVirt's schema; `path` is where (e.g. spec.template.spec.domain)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path or '<root>'}: {message}")
        self.path = path


@cache
def _document() -> dict[str, Any]:
    return json.loads(SCHEMA.read_text())  # type: ignore[no-any-return]


@cache
def _definitions(strict: bool) -> dict[str, Any]:
    definitions = copy.deepcopy(_document()["definitions"])
    if strict:
        for definition in definitions.values():
            if definition.get("type") == "object" and "properties" in definition:
                definition.setdefault("additionalProperties", False)
    return definitions  # type: ignore[no-any-return]


def validate(manifest: dict[str, Any], *, strict: bool = True) -> None:
    """Raise ManifestError naming the first offending path; return None when the manifest fits."""
    if not isinstance(manifest, dict):
        raise ManifestError("", "not a mapping")
    key = f"{manifest.get('apiVersion')} {manifest.get('kind')}"
    root = _document()["roots"].get(key)
    if root is None:
        raise ManifestError("", f"unknown apiVersion and kind {key!r}")
    schema = {"$ref": f"#/definitions/{root}", "definitions": _definitions(strict)}
    error = jsonschema.exceptions.best_match(jsonschema.Draft4Validator(schema).iter_errors(manifest))
    if error is not None:
        raise ManifestError(".".join(str(p) for p in error.absolute_path), error.message)
