"""The published JSON Schemas (schemas/) are what the models generate, and real files validate."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
from pathlib import Path

import pytest
from xtune import paths
from xtune.policies.tree import TreeModel
from xtune.policies.tree_schema import TreeModelDoc
from xtune.sie.analyze import analyze
from xtune.sie.scope import ScopeTable
from xtune.sie.scope_schema import ScopeTableDoc
from xtune.sie.spec import spec_from_dict

SCRIPT = paths.ROOT / "scripts" / "write-schemas"
SHIPPED_MODELS = sorted((paths.ROOT / "models").glob("*/model.json"))
SHIPPED_TABLES = sorted((paths.ROOT / "experiments" / "real").glob("*/*.scope.json"))


def write_schemas():
    loader = importlib.machinery.SourceFileLoader("write_schemas", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@pytest.mark.fast
def test_published_schemas_are_the_models():
    assert SHIPPED_MODELS and SHIPPED_TABLES, "no shipped model or scope table found to validate"
    script = write_schemas()
    published = {p.name for p in (paths.ROOT / "schemas").glob("*.json")}
    assert published == set(script.MODELS), "schemas/ holds other files than scripts/write-schemas writes"
    for name, text in script.generated().items():
        assert (paths.ROOT / "schemas" / name).read_text() == text, (
            f"schemas/{name} differs from its model: run scripts/write-schemas and commit schemas/"
        )


@pytest.mark.fast
@pytest.mark.parametrize("path", SHIPPED_MODELS, ids=lambda p: p.parent.name)
def test_shipped_models_validate(path: Path):
    doc = json.loads(path.read_text())
    TreeModelDoc.model_validate(doc)
    assert TreeModel.load(path).to_doc() == doc, "a shipped model does not round-trip"


@pytest.mark.fast
@pytest.mark.parametrize("path", SHIPPED_TABLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shipped_scope_tables_validate(path: Path):
    """The real programs' tables (experiments/real/) the benchmarks arm."""
    ScopeTableDoc.model_validate_json(path.read_text())


def test_an_analyzed_scope_table_validates():
    """A table the analysis writes (tests/sie/targets/mt_target.c) is a valid document, and loads
    back to the same table."""
    targets = paths.ROOT / "tests" / "sie" / "targets"
    data = {
        "source": "mt_target.c",
        "constant": "K",
        "values": [100, 50, 300],
        "build": "gcc -O2 -pthread -o {out} {src}",
    }
    table = analyze(spec_from_dict(data, targets / "spec.toml"))
    ScopeTableDoc.model_validate_json(table.to_json())
    assert ScopeTable.from_json(table.to_json()) == table
