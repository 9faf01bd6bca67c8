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


# -- hostile codebooks (issue 21, items 13-15) ----------------------------------------------------

LAUGHS = """name: lol
version: 1
dimensions:
  symptom:
    categories:
      - id: crash
        definition: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
"""


def _bomb(levels: int) -> str:
    """A codebook whose definition is `levels` layers of 9 aliases each: 9**levels strings."""
    anchors = ["  x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    anchors += [f"  x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return (
        "anchors:\n" + "\n".join(anchors) + "\nname: lol\nversion: 1\ndimensions:\n  symptom:\n    categories:\n"
        f"      - id: crash\n        definition: *a{levels}\n"
    )


def test_billion_laughs_codebook_is_refused_quickly(tmp_path):
    import time

    p = tmp_path / "lol.yaml"
    p.write_text(_bomb(8))
    assert len(p.read_bytes()) < 1000
    t0 = time.perf_counter()
    with pytest.raises(TaxonomyError, match="expands to more than"):
        load_taxonomy(p)
    assert time.perf_counter() - t0 < 2


def test_non_string_definition_is_refused_not_stringified(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text(LAUGHS)  # a list of 9 strings as the definition: small, but not text
    with pytest.raises(TaxonomyError, match=r"categories\[0\] \(crash\)\.definition: must be text, not list"):
        load_taxonomy(p)
    p.write_text(
        LAUGHS.replace(
            '&a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]', "ok\n        name: {a: 1}"
        )
    )
    with pytest.raises(TaxonomyError, match=r"\.name: must be text, not dict"):
        load_taxonomy(p)


def test_recursive_alias_and_deep_nesting_are_clear_errors(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text("name: &n [*n]\nversion: 1\ndimensions: {}\n")
    with pytest.raises(TaxonomyError, match="expands to more than"):
        load_taxonomy(p)
    p.write_text("name: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(TaxonomyError, match="nested too deeply"):
        load_taxonomy(p)


def test_duplicate_yaml_keys_are_refused_naming_the_lines(tmp_path, raw):
    text = DEFAULT_TAXONOMY.read_text()
    # a second `symptom:` dimension after the first (same indentation)
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip() == "symptom:")
    dup = "\n".join(lines + ["  symptom:", "    categories:", "      - {id: other, definition: something}"])
    p = tmp_path / "t.yaml"
    p.write_text(dup + "\n")
    with pytest.raises(
        TaxonomyError, match=rf"line {len(lines) + 1}: key 'symptom' repeats the one at line {start + 1}"
    ):
        load_taxonomy(p)
    p.write_text(
        "name: a\nversion: 1\ndimensions:\n  s:\n    categories:\n      - id: x\n        definition: one\n        definition: two\n"
    )
    with pytest.raises(TaxonomyError, match="line 8: key 'definition' repeats the one at line 7"):
        load_taxonomy(p)


def test_a_key_repeated_on_one_line_or_a_non_finite_version_is_refused(tmp_path):
    p = tmp_path / "t.yaml"
    head = "name: a\nversion: 1\ndimensions:\n  s:\n    categories:\n"
    p.write_text(head + "      - {id: x, definition: one, definition: two}\n      - {id: y, definition: y}\n")
    with pytest.raises(TaxonomyError, match="line 6: key 'definition' repeats the one at column 17 of that line"):
        load_taxonomy(p)
    for bad in (".nan", ".inf", "-.inf"):
        p.write_text(head.replace("version: 1", f"version: {bad}") + "      - {id: x, definition: one}\n")
        with pytest.raises(TaxonomyError, match="version: must be a finite number or text"):
            load_taxonomy(p)
    p.write_text(head.replace("version: 1", "version: 1.5") + "      - {id: x, definition: one}\n")
    assert load_taxonomy(p).label == "a@1.5"


def test_anchors_for_shared_lists_still_work(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text(
        "name: a\nversion: 1\ndimensions:\n  s:\n    categories:\n"
        "      - {id: x, definition: one, include: &common [alpha, beta]}\n"
        "      - {id: y, definition: two, include: *common}\n"
    )
    assert load_taxonomy(p).dimensions["s"].categories[1].include == ("alpha", "beta")


def _tiny(**dims):
    return {
        "name": "t",
        "version": 1,
        "dimensions": {d: spec or {"categories": [{"id": "a", "definition": "A."}]} for d, spec in dims.items()},
    }


@pytest.mark.parametrize("dim", ["id", "title", "model", "screening", "routing", "provenance"])
def test_dimension_named_like_a_toolkit_field_is_refused(dim):
    with pytest.raises(TaxonomyError, match=f"dimensions.{dim}: '{dim}' is a field the toolkit writes itself"):
        parse_taxonomy(_tiny(area=None, **{dim: None}))


def test_collisions_with_per_dimension_fields_and_groups():
    grouped = {"groups": {"g": "G"}, "categories": [{"id": "a", "definition": "A.", "group": "g"}]}
    with pytest.raises(TaxonomyError, match="symptom_group: collides with the `symptom_group` field"):
        parse_taxonomy(_tiny(symptom=grouped, symptom_group=None))
    with pytest.raises(TaxonomyError, match="area_status: collides"):
        parse_taxonomy(_tiny(area=None, area_status=None))
    with pytest.raises(TaxonomyError, match="area_shown: collides with the derived"):
        parse_taxonomy(_tiny(area=None, area_shown=None))
    same = {"groups": {"a": "A group"}, "categories": [{"id": "a", "definition": "A.", "group": "a"}]}
    with pytest.raises(TaxonomyError, match="category id 'a' is also a group id"):
        parse_taxonomy(_tiny(area=same))
    bad_version = _tiny(area=None)
    bad_version["version"] = {"major": 1}
    with pytest.raises(TaxonomyError, match="version: must be a number or text, not dict"):
        parse_taxonomy(bad_version)


def test_screening_dimension_is_allowed_in_the_screening_codebook_only():
    screening = {"categories": [{"id": "failure_report", "definition": "F."}, {"id": "other", "definition": "O."}]}
    assert parse_taxonomy(_tiny(screening=screening)).dimension_ids == ["screening"]
    with pytest.raises(TaxonomyError, match="'screening' is a field"):
        parse_taxonomy(_tiny(screening=screening, area=None))


def test_shown_decision_words_use_the_dimensions_own_name():
    from dataclasses import astuple

    from classify.core.causeshown import shown_words

    area = shown_words("area")
    assert not any("cause" in w for w in astuple(area))
    assert area.none_shown == "reports with no area shown" and area.shown == "reports with an area shown"
    assert area.decision == "'area shown' decision" and area.routed == "routed as showing no area"
    rc = shown_words("root_cause")
    assert rc.none_shown == "reports with no root cause shown" and rc.noun == "root cause"
