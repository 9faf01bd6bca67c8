import copy

import pytest
import yaml

from classify.core.paths import DEFAULT_TAXONOMY
from classify.core.taxonomy import TaxonomyError, load_taxonomy, parse_taxonomy


@pytest.fixture
def raw():
    return yaml.safe_load(DEFAULT_TAXONOMY.read_text())


def test_shipped_codebook_loads(taxonomy):
    assert taxonomy.name == "gpu-kernel-issues" and taxonomy.version == "1"
    assert len(taxonomy.dimensions["symptom"].categories) == 6
    rc = taxonomy.dimensions["root_cause"]
    assert len(rc.categories) == 15
    assert set(rc.groups) == {"runtime_environment", "compiler_build", "kernel_implementation", "usage"}
    assert rc.group_of("jit_caching") == "compiler_build"
    crash = taxonomy.dimensions["symptom"].category("crash")
    assert crash.include and crash.exclude and "terminates" in crash.definition


def _write(tmp_path, data):
    p = tmp_path / "tax.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


@pytest.mark.parametrize(
    "mutate, place, problem",
    [
        (
            lambda d: d["dimensions"]["symptom"]["categories"][1].pop("id"),
            "dimensions.symptom.categories[1]",
            "missing category id",
        ),
        (
            lambda d: d["dimensions"]["symptom"]["categories"][2].update(id="deployment_failure"),
            "categories[2] (deployment_failure)",
            "duplicate category id",
        ),
        (
            lambda d: d["dimensions"]["root_cause"]["categories"][0].update(group="nowhere"),
            "dimensions.root_cause.categories[0]",
            "unknown group 'nowhere'",
        ),
        (
            lambda d: d["dimensions"]["symptom"].update(categories=[]),
            "dimensions.symptom.categories",
            "empty dimension",
        ),
        (lambda d: d.update(dimensions={}), "dimensions", "non-empty"),
        (lambda d: d.pop("version"), "top level", "missing required key 'version'"),
        (
            lambda d: d["dimensions"]["symptom"]["categories"][0].pop("definition"),
            "categories[0] (deployment_failure)",
            "missing definition",
        ),
    ],
)
def test_malformed_taxonomy_names_file_place_problem(tmp_path, raw, mutate, place, problem):
    data = copy.deepcopy(raw)
    mutate(data)
    p = _write(tmp_path, data)
    with pytest.raises(TaxonomyError) as e:
        load_taxonomy(p)
    msg = str(e.value)
    assert str(p) in msg and place in msg and problem in msg


def test_not_yaml_and_missing_file(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: [unclosed\n")
    with pytest.raises(TaxonomyError, match="not valid YAML"):
        load_taxonomy(p)
    with pytest.raises(TaxonomyError, match="file not found"):
        load_taxonomy(tmp_path / "nope.yaml")


def test_other_taxonomy_one_dimension_any_size():
    t = parse_taxonomy(
        {
            "name": "tiny",
            "version": 3,
            "dimensions": {
                "kind": {
                    "categories": [
                        {"id": "a", "definition": "A."},
                        {"id": "b", "definition": "B."},
                        {"id": "c", "definition": "C."},
                    ]
                }
            },
        }
    )
    assert t.label == "tiny@3" and t.dimension_ids == ["kind"] and t.dimensions["kind"].ids == ["a", "b", "c"]
    assert t.validate_label("kind", "z") == "unknown kind label 'z'"
    assert t.validate_label("kind", None) is None


def test_fingerprint_changes_with_content(raw):
    a = parse_taxonomy(raw)
    b = copy.deepcopy(raw)
    b["dimensions"]["symptom"]["categories"][0]["definition"] += " More."
    assert a.fingerprint() != parse_taxonomy(b).fingerprint()
    assert a.fingerprint() == parse_taxonomy(copy.deepcopy(raw)).fingerprint()


@pytest.mark.parametrize(
    "mutate, place, problem",
    [
        (
            lambda d: d["dimensions"]["symptom"]["categories"][0].update(inclde=["a cue"]),
            "dimensions.symptom.categories[0] (deployment_failure)",
            "unknown key 'inclde' (did you mean 'include'?",
        ),
        (
            lambda d: d["dimensions"]["root_cause"].update(qestion="why?"),
            "dimensions.root_cause",
            "unknown key 'qestion' (did you mean 'question'?",
        ),
        (lambda d: d.update(chnagelog=[]), "top level", "unknown key 'chnagelog' (did you mean 'changelog'?"),
        (lambda d: d.update(owner="me"), "top level", "unknown key 'owner' (known keys: name, version"),
    ],
)
def test_unknown_keys_are_errors_with_a_suggestion(tmp_path, raw, mutate, place, problem):
    # issue #11 item 15: a misspelled `inclde:` validated fine and its cues never reached a prompt
    data = copy.deepcopy(raw)
    mutate(data)
    with pytest.raises(TaxonomyError) as e:
        load_taxonomy(_write(tmp_path, data))
    assert f"{place}: {problem}" in str(e.value)
