"""Safe YAML loading, Flow construction and the flows directory."""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import shutil
from pathlib import Path

import pytest
import yaml

from flowcore.common.limits import MAX_YAML_BYTES, MAX_YAML_DEPTH, MAX_YAML_NODES
from flowcore.flow.building import build_flow
from flowcore.flow.files import (
    FlowCatalog,
    catalog_fingerprint,
    lint_paths,
    load_catalog,
    load_categories,
)
from flowcore.flow.model import (
    DEFAULT_BRANCH_DEPTH,
    DEFAULT_MAX_BRANCH_FANOUT,
    DEFAULT_MAX_UNMATCHED,
    DEFAULT_ON_UNKNOWN,
    AskNode,
    Category,
    CollectNode,
    Flow,
    Slot,
)
from flowcore.flow.yaml_safe import (
    REREAD_WITHIN,
    TOO_DEEP,
    TOO_MANY_VALUES,
    YamlList,
    YamlMap,
    YamlRefused,
    _build_tree,
    _FastLoader,
    _Loader,
    _OverBudget,
    _parse,
    parse_yaml,
)
from tests.support.paths import BROKEN_FLOWS, CLEAN_FLOWS, REPO

CATEGORIES = {"payments": Category(id="payments", title="決済")}

FLOW = """\
id: demo
title: デモ
category: payments
entry: n_start
nodes:
  - id: n_start
    kind: ask
    say: 質問する
    accepts:
      yes: はい
      no: いいえ
      off: 止める
    next:
      yes: n_ids
      no: n_done
      off: n_done
  - id: n_ids
    kind: collect
    say: 集める
    slots:
      order_id:
        ask: 注文番号
        required: true
        pattern: "A[0-9]{5}"
        hint: A と数字5桁
      phone: 電話番号
    next: n_done
  - id: n_done
    kind: end
    say: 締める
    outcome: resolved
"""


def build(text: str = FLOW) -> Flow:
    flow, findings = build_flow(text, categories=CATEGORIES)
    assert flow is not None, findings
    return flow


# --- YAML safety -----------------------------------------------------------------------------


def test_yes_no_on_off_keys_and_values_stay_strings() -> None:
    data = parse_yaml("yes: no\nNo: Yes\non: OFF\nY: n\n").data
    assert data == {"yes": "no", "No": "Yes", "on": "OFF", "Y": "n"}


def test_yes_no_labels_stay_strings() -> None:
    node = build().nodes["n_start"]
    assert isinstance(node, AskNode)
    assert list(node.accepts) == ["yes", "no", "off"]
    assert dict(node.next) == {"yes": "n_ids", "no": "n_done", "off": "n_done"}


def test_only_true_and_false_are_booleans() -> None:
    data = parse_yaml("a: true\nb: False\nc: TRUE\n").data
    assert data == {"a": True, "b": False, "c": True}


def test_numbers_follow_yaml_1_2_and_dates_stay_text() -> None:
    data = parse_yaml("a: 010\nb: 1.5\nc: 2024-01-31\nd: 1_000\ne: 12:30\n").data
    assert data == {"a": 10, "b": 1.5, "c": "2024-01-31", "d": "1_000", "e": "12:30"}


def test_explicit_tag_with_a_wrong_value_is_a_parse_error() -> None:
    with pytest.raises(yaml.YAMLError):
        parse_yaml("a: !!int abc\n")


def test_duplicate_keys_are_recorded_with_the_second_line() -> None:
    data = parse_yaml("a: 1\nb: 2\na: 3\n").data
    assert data.duplicates == [("a", 3)]


def test_alias_bomb_is_refused() -> None:
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, 10):
        refs = ", ".join([f"*l{level - 1}"] * 9)
        lines.append(f"l{level}: &l{level} [{refs}]")
    with pytest.raises(YamlRefused, match="aliases expand"):
        parse_yaml("\n".join(lines))


def test_a_few_aliases_are_fine() -> None:
    data = parse_yaml("a: &x [1, 2]\nb: *x\n").data
    assert data == {"a": [1, 2], "b": [1, 2]}


def test_recursive_alias_is_refused() -> None:
    with pytest.raises(YamlRefused, match="contains it"):
        parse_yaml("a: &x [*x]\n")


@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 3000 + "]" * 3000,
        "a: " + "{b: " * 3000 + "c" + "}" * 3000,
        # Block style costs indentation, so only ~700 levels fit in 256 KiB.
        "".join(" " * i + "k:\n" for i in range(700)),
        "- " * 3000 + "x",
    ],
    ids=["flow-lists", "flow-maps", "block-maps", "block-lists"],
)
def test_deep_nesting_is_refused_without_recursion_error(text: str) -> None:
    with pytest.raises(YamlRefused, match="deeper than 32"):
        parse_yaml(text)


def test_nesting_of_32_levels_is_allowed() -> None:
    parse_yaml("a: " + "[" * 31 + "]" * 31)


def test_aliases_cannot_nest_deeper_than_32() -> None:
    inner = "[" * 20 + "]" * 20
    text = f"a: &x {inner}\nb: &y " + "[" * 20 + "*x" + "]" * 20 + "\n"
    with pytest.raises(YamlRefused, match="deeper than 32"):
        parse_yaml(text)


@pytest.mark.parametrize(
    "text",
    [
        "a: !!python/object/apply:os.system ['echo pwned']",
        "a: !!python/name:os.system ''",
        "a: !custom x",
        "a: !!binary aGVsbG8=",
        "a: !!timestamp 2024-01-01",
        # With an anchor, libyaml composes the document whole and the checks walk it.
        "a: &x !!binary aGVsbG8=\nb: *x",
        "a: &x !!python/name:os.system ''\nb: *x",
    ],
)
def test_python_and_unknown_tags_are_refused(text: str) -> None:
    with pytest.raises(YamlRefused, match="tag") as refused:
        parse_yaml(text)
    assert refused.value.line == 1


def test_text_over_256_kib_is_refused_by_utf8_size() -> None:
    # Fewer characters than the limit, but more bytes: the limit is in bytes.
    text = "a: " + "あ" * (MAX_YAML_BYTES // 3 + 1)
    assert len(text) < MAX_YAML_BYTES
    with pytest.raises(YamlRefused) as refused:
        parse_yaml(text)
    assert refused.value.message == (
        "the text is larger than 256 KiB: split the procedure into smaller flows"
    )


@pytest.mark.parametrize("text", ["- a\n- b\n", "just text\n", "", "# only a comment\n"])
def test_a_document_that_is_not_a_mapping_is_refused(text: str) -> None:
    with pytest.raises(YamlRefused, match="a flow is a mapping"):
        parse_yaml(text)


def test_refused_yaml_becomes_a_schema_finding_in_build_flow() -> None:
    flow, findings = build_flow(
        "id: demo\nx: !!python/object/apply:os.system ['echo pwned']\n",
        categories=CATEGORIES,
        file="demo.yaml",
    )
    assert flow is None
    assert [(f["code"], f["where"], f.get("line")) for f in findings] == [("schema", "demo", 2)]


def shape(value: object) -> object:
    """Everything a parsed document holds: each value with its type, and every line."""
    if isinstance(value, YamlMap):
        pairs = [(shape(key), shape(item)) for key, item in value.items()]
        lines = [(repr(key), line) for key, line in value.key_lines.items()]
        return ("map", value.line, pairs, lines, value.duplicates)
    if isinstance(value, YamlList):
        return ("list", value.line, [shape(item) for item in value], value.item_lines)
    return (type(value).__name__, repr(value))


def repeats(value: object) -> bool:
    """Whether any mapping in ``value`` recorded a repeated key."""
    if isinstance(value, YamlMap):
        return bool(value.duplicates) or any(repeats(item) for item in value.values())
    return isinstance(value, YamlList) and any(repeats(item) for item in value)


def built_in_one_pass(text: str) -> YamlMap | None:
    loader = _FastLoader(text)
    try:
        root = loader.get_single_node()
        assert root is not None
        return _build_tree(loader, root)
    finally:
        loader.dispose()


def nested(levels: int, inner: str = "") -> str:
    return "a: " + "[" * levels + inner + "]" * levels + "\n"


def nested_maps(levels: int) -> str:
    """Mappings ``levels`` deep under the root, the innermost holding ``b: x``."""
    return "a: " + "{b: " * levels + "x" + "}" * levels + "\n"


def deep_block(maps: int) -> str:
    """Block mappings ``maps`` deep, the root included, one a line; the keys and the
    innermost value are one level deeper than their mapping."""
    return "".join(" " * i + "k:\n" for i in range(maps - 1)) + " " * (maps - 1) + "k: x\n"


def values(count: int) -> str:
    """A document of exactly ``count`` values: the root, one key and a list of count - 3."""
    return "a: [" + ", ".join(["x"] * (count - 3)) + "]\n"


def pairs(count: int) -> str:
    """A document of exactly ``count`` values, nearly all of them keys and values of the root."""
    head, used = ("", 1) if count % 2 else ("z: [x]\n", 4)
    return head + "".join(f"k{i}: x\n" for i in range((count - used) // 2))


PLAIN_DOCUMENTS = {
    **{
        path.name: path.read_text(encoding="utf-8")
        for path in sorted((REPO / "flows").glob("*.yaml"))
    },
    "flow": FLOW,
    "repeated-key": "a: 1\nb: 2\na: 3\n",
    "repeated-keys-nested": "a: {x: 1, x: 2}\nb:\n  - {y: 1, y: 2}\n  - [z, z]\nb: again\n",
    "scalar-keys": "1: int key\ntrue: bool key\n~: null key\n1.5: float key\n-.inf: neg\n",
    "empty-values": "a: []\nb: {}\nc: ''\nd:\ne: null\nf: ~\n",
    "yaml-1.2-scalars": "a: yes\nb: No\nc: 0o7\nd: 0x1f\ne: .inf\nf: -.5e3\ng: 010\n"
    "h: 2024-01-31\n",
    "explicit-tags": "a: !!int 3\nb: !!str 12\nc: !!float 1\nd: !!bool true\n"
    "e: !!null ''\nf: ! 7\n",
    "quoted-and-block": "x: 'quoted'\nq: '12'\ny: \"dq\\tz\"\nz: |\n  block\n  text\n"
    "w: >\n  folded\n  text\n",
    "flow-style": "k: [[1, [2, {m: [3]}]], {n: {o: p}}]\n",
    "32-levels": nested(31),
    "32-levels-of-mappings": nested_maps(30),
    "as-many-values-as-allowed": values(MAX_YAML_NODES),
    "as-many-keys-and-values-as-allowed": pairs(MAX_YAML_NODES),
}


@pytest.mark.parametrize("text", PLAIN_DOCUMENTS.values(), ids=PLAIN_DOCUMENTS)
def test_a_document_without_anchors_is_built_in_one_pass_as_the_pure_loader_builds_it(
    text: str,
) -> None:
    built = built_in_one_pass(text)
    assert built is not None
    assert shape(built) == shape(_parse(_Loader(text)).data)
    assert shape(parse_yaml(text).data) == shape(built)
    assert built.any_duplicates is repeats(built)  # what lint reads instead of looking


LEFT_TO_THE_CHECKS = {
    "a-list-as-a-key": "? [a]\n: b\n",
    "a-mapping-as-a-key": "? {a: b}\n: c\n",
    "a-scalar-tag-on-a-mapping": "a: !!str {b: c}\n",
    "a-mapping-tag-on-a-scalar": "a: !!map x\n",
    "a-custom-tag": "a: !custom x\n",
    "a-timestamp": "a: !!timestamp 2024-01-01\n",
}


@pytest.mark.parametrize("text", LEFT_TO_THE_CHECKS.values(), ids=LEFT_TO_THE_CHECKS)
def test_the_one_pass_build_leaves_what_a_check_refuses_to_the_checks(text: str) -> None:
    assert built_in_one_pass(text) is None


@pytest.mark.parametrize(
    "text", [values(MAX_YAML_NODES + 1), pairs(MAX_YAML_NODES + 1)], ids=["values", "pairs"]
)
def test_libyaml_stops_composing_at_the_first_value_past_the_bound(text: str) -> None:
    loader = _FastLoader(text)
    with pytest.raises(YamlRefused) as refused:
        loader.get_single_node()
    assert refused.value.message == TOO_MANY_VALUES


@pytest.mark.parametrize(
    ("text", "line"),
    [(nested(32), 1), (nested(31, "x"), 1), (nested_maps(31), 1), (deep_block(32), 32)],
    ids=["33-levels", "a-scalar-at-33-levels", "a-mapping-at-33-levels", "block-mappings"],
)
def test_the_one_pass_build_refuses_the_first_value_past_32_levels_as_the_pure_loader_does(
    text: str, line: int
) -> None:
    with pytest.raises(YamlRefused) as refused:
        built_in_one_pass(text)
    assert (refused.value.message, refused.value.line) == (TOO_DEEP, line)
    with pytest.raises(YamlRefused) as pure:
        _parse(_Loader(text))
    assert (pure.value.message, pure.value.line) == (TOO_DEEP, line)


def test_more_values_than_the_limit_are_refused_without_aliases_too() -> None:
    assert len(parse_yaml(values(MAX_YAML_NODES)).data["a"]) == MAX_YAML_NODES - 3
    with pytest.raises(YamlRefused, match=f"more than {MAX_YAML_NODES} values"):
        parse_yaml(values(MAX_YAML_NODES + 1))
    assert len(parse_yaml(pairs(MAX_YAML_NODES)).data) == (MAX_YAML_NODES - 2) // 2
    with pytest.raises(YamlRefused, match=f"more than {MAX_YAML_NODES} values"):
        parse_yaml(pairs(MAX_YAML_NODES + 1))


def filled(head: str, unit: str, tail: str) -> str:
    """``head``, ``unit`` as often as fits in 250 KB (UTF-8), ``tail``."""
    room = 250 * 1024 - len((head + tail).encode())
    return head + unit * (room // len(unit.encode())) + tail


HOSTILE = filled("id: x\nnodes: [", "1,", "1]\n")  # 250 KB, more than 100,000 values


def test_a_text_of_many_values_is_refused_by_the_count_as_libyaml_composes_it() -> None:
    # Counted after composing, the refusal was "aliases expand ..." and came after the
    # whole text was composed, twice (libyaml, then the pure-Python loader): seconds of CPU.
    with pytest.raises(YamlRefused) as refused:
        parse_yaml(HOSTILE)
    assert refused.value.message == TOO_MANY_VALUES
    assert refused.value.line is None
    # Raised by the counter libyaml calls while it composes, not by a check of the result:
    assert refused.traceback[-1].name == "count_value"
    assert any("_compose_node" in entry.name for entry in refused.traceback)

    loader = _FastLoader(HOSTILE)
    counter = loader.descend_resolver
    with pytest.raises(YamlRefused):
        loader.get_single_node()
    values_left = counter.__closure__[0].cell_contents  # type: ignore[attr-defined]
    assert values_left == -1  # MAX_YAML_NODES + 1 values counted, and not one more


HOSTILE_TEXTS = {
    "block-list": (filled("id: x\na:\n", "- 1\n", ""), TOO_MANY_VALUES, None),
    "flow-mappings": (
        filled("id: x\nnodes:\n", "  - {id: n, kind: tell}\n", ""),
        TOO_MANY_VALUES,
        None,
    ),
    "keys-without-values": (filled("id: x\na: {", "k,", "k}\n"), TOO_MANY_VALUES, None),
    "unicode": (filled("id: x\na: [", "あ,", "あ]\n"), TOO_MANY_VALUES, None),
    "byte-order-mark": ("\ufeff" + HOSTILE, TOO_MANY_VALUES, None),
    "tags-on-every-value": (filled("id: x\na: [", "!!str 1,", "1]\n"), TOO_MANY_VALUES, None),
    "anchors-on-every-value": (
        "id: x\na: [" + ", ".join(f"&a{i} 1" for i in range(21_000)) + "]\n",
        TOO_MANY_VALUES,
        None,
    ),
    "deep-flow-lists": ("id: x\na: " + "[" * 3000 + "]" * 3000 + "\n", TOO_DEEP, 2),
    "an-alias-fan": (
        "id: x\nb: &b [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\nc: [" + ", ".join(["*b"] * 20_000) + "]\n",
        f"aliases expand the document beyond {MAX_YAML_NODES} values: write it out",
        3,
    ),
    "aliases-nested-too-deep": (
        "a: &x " + "[" * 20 + "]" * 20 + "\nb: &y " + "[" * 20 + "*x" + "]" * 20 + "\n",
        f"aliases nest the document deeper than {MAX_YAML_DEPTH} levels: write it out",
        1,
    ),
    "a-recursive-alias": (
        "a: &x [*x]\n",
        "an alias refers to a node that contains it: remove the alias",
        1,
    ),
    "a-python-tag": (
        "id: x\nt: !!python/object/apply:os.system ['echo']\n",
        "the tag !!python/object/apply:os.system is not allowed: a flow holds only text, "
        "numbers, true/false, lists and mappings: remove the tag",
        2,
    ),
}


@pytest.mark.parametrize(("text", "message", "line"), HOSTILE_TEXTS.values(), ids=HOSTILE_TEXTS)
def test_each_bound_refuses_a_hostile_text_for_its_real_cause(
    text: str, message: str, line: int | None
) -> None:
    with pytest.raises(YamlRefused) as refused:
        parse_yaml(text)
    assert (refused.value.message, refused.value.line) == (message, line)


NEAR_LIMIT = "id: x\na: [" + ",".join(["v" * 11] * 19_990) + "]\n"  # 234 KB, 19,993 values


def test_a_syntax_error_near_the_start_is_worded_by_pyyaml_and_far_in_by_libyaml() -> None:
    with pytest.raises(yaml.YAMLError) as near:
        parse_yaml("id: x\nb: [\n")
    assert near.value.problem == "expected the node content, but found '<stream end>'"  # type: ignore[attr-defined]
    # Reading 234 KB again in pure Python would cost half a second: libyaml's words instead.
    with pytest.raises(yaml.YAMLError) as far:
        parse_yaml(NEAR_LIMIT + "b: [\n")
    assert far.value.problem == "did not find expected node content"  # type: ignore[attr-defined]
    with pytest.raises(_OverBudget):
        _parse(_Loader(NEAR_LIMIT + "b: [\n", stop_after=REREAD_WITHIN))


def test_a_list_as_a_key_after_many_values_is_refused_without_reading_the_text_again() -> None:
    with pytest.raises(yaml.YAMLError) as refused:
        parse_yaml(NEAR_LIMIT + "? [k]\n: v\n")
    assert refused.value.problem == "a key is a list or a mapping: keys must be plain text"  # type: ignore[attr-defined]
    assert refused.value.problem_mark.line + 1 == 3  # type: ignore[attr-defined]


def test_mappings_nested_deeper_than_32_levels_are_refused() -> None:
    parse_yaml(nested_maps(30))
    with pytest.raises(YamlRefused, match="deeper than 32"):
        parse_yaml(nested_maps(31))


def test_line_numbers_of_mappings_and_keys() -> None:
    data = parse_yaml(FLOW).data
    assert data.line == 1
    assert data.key_lines["nodes"] == 5
    nodes = data["nodes"]
    assert nodes.item_lines == [6, 17, 28]
    assert [node.line for node in nodes] == [6, 17, 28]
    assert nodes[0]["accepts"].key_lines == {"yes": 10, "no": 11, "off": 12}
    assert nodes[1]["slots"]["order_id"].key_lines["pattern"] == 24


# --- building flows --------------------------------------------------------------------------


def test_build_flow_gives_frozen_flows_with_read_only_mappings() -> None:
    flow = build()
    with pytest.raises(dataclasses.FrozenInstanceError):
        flow.title = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        flow.nodes["x"] = flow.nodes["n_done"]  # type: ignore[index]
    node = flow.nodes["n_start"]
    assert isinstance(node, AskNode)
    with pytest.raises(TypeError):
        node.next["maybe"] = "n_done"  # type: ignore[index]


def test_build_flow_keeps_the_authors_order() -> None:
    flow = build()
    assert list(flow.nodes) == ["n_start", "n_ids", "n_done"]


def test_slot_short_form_is_an_optional_slot() -> None:
    node = build().nodes["n_ids"]
    assert isinstance(node, CollectNode)
    assert node.slots == (
        Slot(
            name="order_id", ask="注文番号", required=True, pattern="A[0-9]{5}", hint="A と数字5桁"
        ),
        Slot(name="phone", ask="電話番号"),
    )


def test_defaults_come_from_the_model() -> None:
    flow = build()
    assert (flow.version, flow.summary, flow.on_stuck) == (None, None, None)
    assert flow.max_unmatched == DEFAULT_MAX_UNMATCHED
    assert flow.max_branch_fanout == DEFAULT_MAX_BRANCH_FANOUT
    assert flow.branch_depth == DEFAULT_BRANCH_DEPTH
    assert flow.on_unknown == DEFAULT_ON_UNKNOWN


@pytest.mark.parametrize(("written", "version"), [("3", 3), ("'3.1'", "3.1"), ("v2", "v2")])
def test_version_is_text_or_int(written: str, version: object) -> None:
    assert build(FLOW.replace("entry:", f"version: {written}\nentry:")).version == version


def test_flow_keeps_its_source_and_content_hash() -> None:
    flow = build()
    assert flow.source == FLOW
    assert flow.content_hash == hashlib.sha256(FLOW.encode("utf-8")).hexdigest()


def test_build_flow_gives_no_flow_when_there_is_an_error() -> None:
    flow, findings = build_flow(FLOW.replace("no: n_done", "no: n_gone"), categories=CATEGORIES)
    assert flow is None
    assert [f["code"] for f in findings] == ["bad_target"]


def test_unparsable_flow_names_the_id_it_can_see() -> None:
    _, findings = build_flow("id: demo\ntitle: [\n", categories=CATEGORIES)
    assert [(f["code"], f["where"]) for f in findings] == [("schema", "demo")]


# --- files -----------------------------------------------------------------------------------


def test_load_categories_reads_title_and_description() -> None:
    categories, findings = load_categories(CLEAN_FLOWS / "categories.yaml")
    assert findings == []
    assert categories["payments"] == Category(
        id="payments", title="決済", description="支払い・請求・返金に関する問い合わせ"
    )
    assert list(categories) == ["payments", "account"]


def test_load_categories_leaves_out_a_broken_entry(tmp_path: Path) -> None:
    path = tmp_path / "categories.yaml"
    path.write_text("good: {title: 良い}\nbad: {titel: 悪い}\n", encoding="utf-8")
    categories, findings = load_categories(path)
    assert list(categories) == ["good"]
    assert categories["good"].description == ""
    assert {(f["code"], f["where"], f["line"]) for f in findings} == {
        ("schema", "categories/bad/titel", 2),  # unknown key, did you mean 'title'
        ("schema", "categories/bad", 2),  # no title
    }


def test_missing_categories_file_is_one_finding_naming_it(tmp_path: Path) -> None:
    categories, findings = load_categories(tmp_path / "categories.yaml")
    assert categories is None
    assert [(f["code"], f["file"]) for f in findings] == [
        ("schema", str(tmp_path / "categories.yaml"))
    ]
    assert "categories.yaml is missing" in findings[0]["message"]


def test_without_categories_yaml_a_catalog_has_one_error_and_serves_nothing(
    tmp_path: Path,
) -> None:
    shutil.copy(CLEAN_FLOWS / "refund.yaml", tmp_path)
    shutil.copy(BROKEN_FLOWS / "broken.yaml", tmp_path)
    catalog = load_catalog(tmp_path)
    # The missing file once, and broken.yaml's own error: no unknown_category per flow.
    assert [(f["code"], f["where"]) for f in catalog.errors] == [
        ("schema", "categories"),
        ("bad_target", "broken/n_start/next"),
    ]
    assert catalog.flows == {}


def test_load_catalog_keeps_clean_flows() -> None:
    catalog = load_catalog(CLEAN_FLOWS)
    assert isinstance(catalog, FlowCatalog)
    assert catalog.findings == ()
    assert list(catalog.flows) == ["login_help", "refund"]
    assert set(catalog.categories) == {"payments", "account"}


def test_loading_flows_leaves_no_garbage_for_the_cycle_collector() -> None:
    # What lets a load hold the collector off: every object it drops is freed at once.
    for directory in (REPO / "flows", CLEAN_FLOWS, BROKEN_FLOWS):
        gc.collect()
        gc.disable()
        try:
            assert load_catalog(directory).flows
            lint_paths([directory])
            assert gc.collect() == 0
        finally:
            gc.enable()


def refusal(text: str) -> str:
    """What parse_yaml refuses ``text`` with (the exception is dropped here, with its frames)."""
    try:
        parse_yaml(text)
    except (YamlRefused, yaml.YAMLError) as refused:
        return type(refused).__name__
    raise AssertionError("accepted")


def test_parsing_with_aliases_or_refusing_a_text_leaves_no_garbage_for_the_collector() -> None:
    # What lets a parse hold the collector off: a refused text's objects are freed at once.
    # (Not a recursive alias, "a: &x [*x]": a node that contains itself is a cycle.)
    texts = [HOSTILE, NEAR_LIMIT + "b: [\n", "a:\n\t- x\n", "a: &x !!binary x\nb: *x\n"]
    gc.collect()
    gc.disable()
    try:
        assert [refusal(text) for text in texts] == [
            "YamlRefused",
            "ParserError",
            "ScannerError",
            "YamlRefused",
        ]
        assert parse_yaml("a: &x [1]\nb: *x\n").data == {"a": [1], "b": [1]}
        assert gc.collect() == 0
    finally:
        gc.enable()


@pytest.mark.parametrize("enabled", [True, False])
def test_a_load_or_a_parse_gives_the_cycle_collector_back_as_it_found_it(enabled: bool) -> None:
    if not enabled:
        gc.disable()
    try:
        load_catalog(CLEAN_FLOWS)
        assert gc.isenabled() is enabled
        lint_paths([CLEAN_FLOWS])
        assert gc.isenabled() is enabled
        parse_yaml(FLOW)
        assert gc.isenabled() is enabled
        refusal(HOSTILE)
        assert gc.isenabled() is enabled
    finally:
        gc.enable()


def test_load_catalog_leaves_out_flows_with_errors_but_keeps_their_findings() -> None:
    catalog = load_catalog(BROKEN_FLOWS)
    assert list(catalog.flows) == ["login_help"]
    assert [(f["code"], f["where"]) for f in catalog.errors] == [
        ("bad_target", "broken/n_start/next")
    ]
    assert catalog.errors[0]["file"] == str(BROKEN_FLOWS / "broken.yaml")
    assert catalog.errors[0]["line"] == 9


def test_load_catalog_checks_the_file_name(tmp_path: Path) -> None:
    shutil.copy(CLEAN_FLOWS / "categories.yaml", tmp_path)
    shutil.copy(CLEAN_FLOWS / "refund.yaml", tmp_path / "refunds.yaml")
    catalog = load_catalog(tmp_path)
    assert [f["code"] for f in catalog.errors] == ["id_mismatch"]
    assert catalog.flows == {}


def edit(path: Path, before: str, after: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert before in text
    path.write_text(text.replace(before, after), encoding="utf-8")


@pytest.fixture
def live_dir(tmp_path: Path) -> Path:
    shutil.copytree(CLEAN_FLOWS, tmp_path, dirs_exist_ok=True)
    return tmp_path


def test_a_reload_keeps_a_broken_files_last_good_flow_and_reloads_the_others(
    live_dir: Path,
) -> None:
    first = load_catalog(live_dir)
    edit(live_dir / "refund.yaml", "next:\n", "nxet:\n")  # refund breaks
    edit(live_dir / "login_help.yaml", "title: ログインできない", "title: ログインできない（改）")
    shutil.copy(BROKEN_FLOWS / "broken.yaml", live_dir)  # a new file that never linted
    reloaded = load_catalog(live_dir, last_good=first)
    assert reloaded.flows["refund"] is first.flows["refund"]
    assert reloaded.flows["login_help"].title == "ログインできない（改）"
    assert "broken" not in reloaded.flows
    assert reloaded.kept == ("refund.yaml",)
    assert reloaded.files["refund.yaml"].errors
    assert reloaded.files["broken.yaml"].errors and reloaded.files["broken.yaml"].flow is None

    # Still broken on the next reload: the same last good version stays.
    again = load_catalog(live_dir, last_good=reloaded)
    assert again.flows["refund"] is first.flows["refund"]


def test_a_reload_drops_a_deleted_file_even_when_another_is_broken(live_dir: Path) -> None:
    first = load_catalog(live_dir)
    (live_dir / "login_help.yaml").unlink()
    edit(live_dir / "refund.yaml", "next:\n", "nxet:\n")
    reloaded = load_catalog(live_dir, last_good=first)
    assert list(reloaded.flows) == ["refund"]


def test_a_reload_keeps_the_categories_when_categories_yaml_cannot_be_read(
    live_dir: Path,
) -> None:
    first = load_catalog(live_dir)
    (live_dir / "categories.yaml").write_text("payments: [unclosed\n", encoding="utf-8")
    edit(live_dir / "refund.yaml", "version: 2", "version: 3")
    reloaded = load_catalog(live_dir, last_good=first)
    assert reloaded.categories_kept
    assert dict(reloaded.categories) == dict(first.categories)
    assert reloaded.flows["refund"].version == 3  # judged against the kept categories


def test_a_kept_flow_keeps_its_category_listed(live_dir: Path) -> None:
    first = load_catalog(live_dir)
    edit(live_dir / "categories.yaml", "account:", "accounts:")  # login_help's category goes
    reloaded = load_catalog(live_dir, last_good=first)
    assert reloaded.kept == ("login_help.yaml",)
    assert reloaded.flows["login_help"] is first.flows["login_help"]
    assert reloaded.categories["account"] == first.categories["account"]


def test_catalog_fingerprint_changes_when_a_file_changes(tmp_path: Path) -> None:
    shutil.copytree(CLEAN_FLOWS, tmp_path, dirs_exist_ok=True)
    before = catalog_fingerprint(tmp_path)
    assert [name for name, _, _ in before] == ["categories.yaml", "login_help.yaml", "refund.yaml"]
    assert catalog_fingerprint(tmp_path) == before
    path = tmp_path / "refund.yaml"
    path.write_text(path.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    assert catalog_fingerprint(tmp_path) != before
    (tmp_path / "login_help.yaml").unlink()
    assert len(catalog_fingerprint(tmp_path)) == 2


def test_catalog_fingerprint_of_a_missing_directory_is_empty(tmp_path: Path) -> None:
    assert catalog_fingerprint(tmp_path / "nope") == ()


def test_lint_paths_counts_flow_files_and_takes_categories_from_their_directory() -> None:
    checked, findings = lint_paths([BROKEN_FLOWS / "broken.yaml", CLEAN_FLOWS])
    assert checked == 3
    assert [f["code"] for f in findings] == ["bad_target"]


def test_lint_paths_falls_back_to_the_configured_categories(tmp_path: Path) -> None:
    shutil.copy(CLEAN_FLOWS / "refund.yaml", tmp_path)
    checked, findings = lint_paths([tmp_path / "refund.yaml"], fallback_dir=CLEAN_FLOWS)
    assert (checked, findings) == (1, [])
    checked, findings = lint_paths([tmp_path / "refund.yaml"])
    assert [(f["code"], f["where"]) for f in findings] == [("schema", "categories")]


def test_lint_paths_refuses_a_missing_path(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        lint_paths([tmp_path / "nope.yaml"])
