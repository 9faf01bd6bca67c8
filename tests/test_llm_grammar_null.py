"""`--opt allow_null=true` on a grammar-based server (local:, llama.cpp's json_object + schema): the
grammar the server builds from the answer schema must still allow only the codebook's ids or null.
A type list before the enum made it accept any string, and the 135M model answered the answer
form's placeholder ("<one symptom id or null>") for every record."""

from __future__ import annotations

import json

import pytest

from classify.classifiers.base import ModelOptions, make_classifier


def _rules(gbnf: str) -> dict[str, str]:
    return dict(line.split(" ::= ", 1) for line in gbnf.splitlines() if " ::= " in line)


@pytest.mark.parametrize("rationale", [False, True])
def test_nullable_ids_stay_closed_in_the_local_servers_grammar(taxonomy, rationale):
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    clf = make_classifier(
        "local:smollm2-135m", taxonomy, ModelOptions(extra={"allow_null": True, "rationale": rationale})
    )
    rules = _rules(json_schema_to_gbnf(json.dumps(clf.schema)))
    for d, dim in taxonomy.dimensions.items():
        alternatives = {a.strip() for a in rules[d.replace("_", "-")].split("|")}
        assert alternatives == {json.dumps(json.dumps(c)) for c in dim.ids} | {'"null"'}, d
    # free text (the `char` rule) only where it is meant: the rationale
    assert ("char" in rules) == rationale
    assert all("char" not in rules[d.replace("_", "-")] for d in taxonomy.dimension_ids)
