"""Safe YAML for flows: size, values, depth, aliases and tags bounded before anything is built.

YAML comes from people and from agents (drafts), so parsing is defensive: the
text size, the number of values, the nesting depth, the alias expansion and the
tags are bounded or refused before anything is built, and a text past a bound
costs no more than the bound allows. Scalars follow the YAML 1.2 core schema:
only ``true``/``false`` are booleans (``yes``/``no``/``on``/``off`` stay text,
which matters for a decision tree whose labels are answers), and there are no
timestamps or merge keys. Every mapping remembers the 1-based line of itself
and of each key, so findings can point at the line to fix.
"""

from __future__ import annotations

import contextlib
import gc
import re
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import yaml
from yaml._yaml import CParser  # libyaml, shipped in PyYAML's wheels
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from flowcore.common.limits import MAX_YAML_BYTES, MAX_YAML_DEPTH, MAX_YAML_NODES

NOT_A_MAPPING = (
    "a flow is a mapping of keys (id, title, nodes, ...), not a list or a single value: "
    "start the document with id: ..."
)

_TAG_PREFIX = "tag:yaml.org,2002:"
_ALLOWED_TAGS = frozenset(
    _TAG_PREFIX + name for name in ("str", "int", "float", "bool", "null", "seq", "map")
)
_BOOL_RE = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT_RE = re.compile(r"^[-+]?[0-9]+$")
_FLOAT_RE = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_NULL_RE = re.compile(r"^(?:~|null|Null|NULL|)$")

TOO_MANY_VALUES = (
    f"the document holds more than {MAX_YAML_NODES} values (each key, list item and text "
    "counts): split the procedure into smaller flows"
)
TOO_DEEP = f"nesting is deeper than {MAX_YAML_DEPTH} levels: flatten the document"
# A text libyaml cannot read is read again by the pure-Python loader for its error's words
# (see _reread) when the error lies within this many characters: about 35 ms of CPU.
REREAD_WITHIN = 16 * 1024


class YamlRefused(Exception):
    """YAML that is unsafe or pointless to load: too big, too deep, a bomb, a foreign tag."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message if line is None else f"{message} (line {line})")
        self.message = message
        self.line = line


class YamlMap(dict[Any, Any]):
    """A YAML mapping that remembers its line, each key's line and any repeated key."""

    # On a document's root: whether any mapping in the document repeated a key, when the
    # parser knows (its one-pass build records it); None: not known, look.
    any_duplicates: bool | None = None

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.key_lines: dict[Any, int] = {}
        self.duplicates: list[tuple[Any, int]] = []


class YamlList(list[Any]):
    """A YAML sequence that remembers its line and each item's line."""

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.item_lines: list[int] = []


def line_of(value: object) -> int | None:
    """The line a parsed mapping or sequence starts at; None for a plain value."""
    line = getattr(value, "line", None)
    return line if isinstance(line, int) else None


def key_line_of(mapping: object, key: object) -> int | None:
    """The line of ``key`` in a parsed mapping; None where it is not known."""
    lines = getattr(mapping, "key_lines", None)
    line = lines.get(key) if isinstance(lines, dict) else None
    return line if isinstance(line, int) else None


@dataclass(frozen=True)
class LoadedDoc:
    """A parsed flow document; line numbers live on its YamlMap/YamlList values."""

    data: YamlMap


def _line(node: Node) -> int:
    return node.start_mark.line + 1


class _OverBudget(Exception):
    """The pure-Python loader read past the characters it was given (``stop_after``)."""


class _Loader(yaml.SafeLoader):
    """Pure-Python SafeLoader with YAML 1.2 core scalars, the bounds and line-aware mappings.

    ``stop_after``: give up (``_OverBudget``) once the text is read past that many
    characters.
    """

    # A fresh table, so none of SafeLoader's YAML 1.1 resolvers (yes/no, 0o, dates, <<) apply.
    yaml_implicit_resolvers: dict[Any, Any] = {}

    def __init__(self, stream: str, *, stop_after: int | None = None) -> None:
        super().__init__(stream)
        self._stop_after = stop_after
        self._values = 0
        self._depth = 0

    def fetch_flow_collection_start(self, token_class: Any) -> None:
        # The scanner looks ahead over every open "[" or "{" on a line, which is quadratic;
        # stop at the depth limit before that lookahead gets expensive.
        if self.flow_level >= MAX_YAML_DEPTH:
            raise YamlRefused(TOO_DEEP, self.get_mark().line + 1)
        super().fetch_flow_collection_start(token_class)

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        # Values and levels are counted here, before each is composed, so a text past a bound
        # is never composed further and deep nesting never reaches the recursion limit.
        if self._stop_after is not None and self.index > self._stop_after:
            raise _OverBudget
        if self.check_event(AliasEvent):  # the node it names, composed already
            return super().compose_node(parent, index)
        self._values += 1
        if self._values > MAX_YAML_NODES:
            raise YamlRefused(TOO_MANY_VALUES)
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                line = self.peek_event().start_mark.line + 1  # type: ignore[no-untyped-call]
                raise YamlRefused(TOO_DEEP, line)
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node is not None and node.tag not in _ALLOWED_TAGS:
            raise _tag_refused(node)
        return node

    def construct_line_map(self, node: MappingNode) -> YamlMap:
        result = YamlMap(_line(node))
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):
                raise ConstructorError(
                    None,
                    None,
                    "a key is a list or a mapping: keys must be plain text",
                    key_node.start_mark,
                )
            if key in result:
                result.duplicates.append((key, _line(key_node)))
            result[key] = self.construct_object(value_node, deep=True)
            result.key_lines[key] = _line(key_node)
        return result

    def construct_line_list(self, node: SequenceNode) -> YamlList:
        result = YamlList(_line(node))
        for item in node.value:
            result.append(self.construct_object(item, deep=True))
            result.item_lines.append(_line(item))
        return result

    def construct_strict_bool(self, node: ScalarNode) -> bool:
        return _checked_scalar(self, node, _BOOL_RE, "true or false").lower() == "true"

    def construct_strict_int(self, node: ScalarNode) -> int:
        return int(_checked_scalar(self, node, _INT_RE, "a whole number"))

    def construct_strict_float(self, node: ScalarNode) -> float:
        text = _checked_scalar(self, node, _FLOAT_RE, "a number").lower()
        return float(text.replace(".inf", "inf").replace(".nan", "nan"))


def _tag_refused(node: Node) -> YamlRefused:
    shown = node.tag.replace(_TAG_PREFIX, "!!")
    return YamlRefused(
        f"the tag {shown} is not allowed: a flow holds only text, numbers, "
        "true/false, lists and mappings: remove the tag",
        _line(node),
    )


def _checked_scalar(loader: _Loader, node: ScalarNode, pattern: re.Pattern[str], what: str) -> str:
    # Only an explicit tag (``!!int abc``) can reach a constructor with a value its resolver
    # would not have matched; refuse it as a parse error instead of crashing in int().
    value = loader.construct_scalar(node)
    if not pattern.match(value):
        raise ConstructorError(None, None, f"{value!r} is not {what}", node.start_mark)
    return value


_Loader.add_implicit_resolver(_TAG_PREFIX + "bool", _BOOL_RE, list("tTfF"))
_Loader.add_implicit_resolver(_TAG_PREFIX + "int", _INT_RE, list("-+0123456789"))
_Loader.add_implicit_resolver(_TAG_PREFIX + "float", _FLOAT_RE, list("-+0123456789."))
_Loader.add_implicit_resolver(_TAG_PREFIX + "null", _NULL_RE, ["~", "n", "N", ""])
_Loader.add_constructor(_TAG_PREFIX + "map", _Loader.construct_line_map)
_Loader.add_constructor(_TAG_PREFIX + "seq", _Loader.construct_line_list)
_Loader.add_constructor(_TAG_PREFIX + "bool", _Loader.construct_strict_bool)
_Loader.add_constructor(_TAG_PREFIX + "int", _Loader.construct_strict_int)
_Loader.add_constructor(_TAG_PREFIX + "float", _Loader.construct_strict_float)


def _children(node: Node) -> Iterable[Node]:
    if isinstance(node, SequenceNode):
        items: list[Node] = node.value
        return items
    if isinstance(node, MappingNode):
        return (child for pair in node.value for child in pair)
    return ()


def _check_expansion(root: Node) -> None:
    """Refuse a composed document that nests too deep, holds a foreign tag, or whose aliases
    expand too far, too deep, or forever.

    Sizes are memoised per composed node, so the work is linear in the text even
    when the expanded document would have billions of nodes.
    """
    _Expansion().visit(root, 1)


class _Expansion:
    # Methods, not a recursive closure, which is a reference cycle: see ``_TreeBuilder``.

    def __init__(self) -> None:
        self.known: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded count, height)
        self.active: set[int] = set()

    def visit(self, node: Node, depth: int) -> tuple[int, int]:
        key = id(node)
        if key in self.active:
            raise YamlRefused(
                "an alias refers to a node that contains it: remove the alias", _line(node)
            )
        if key not in self.known:
            if node.tag not in _ALLOWED_TAGS:  # (libyaml's nodes: _Loader refused it already)
                raise _tag_refused(node)
            if depth > MAX_YAML_DEPTH:  # where it is written: aliases come after their anchor
                raise YamlRefused(TOO_DEEP, _line(node))
            self.active.add(key)
            count, height = 1, 1
            for child in _children(node):
                child_count, child_height = self.visit(child, depth + 1)
                count += child_count
                height = max(height, child_height + 1)
                if count > MAX_YAML_NODES:
                    raise YamlRefused(
                        f"aliases expand the document beyond {MAX_YAML_NODES} values: write it out",
                        _line(node),
                    )
            self.active.discard(key)
            self.known[key] = (count, height)
        count, height = self.known[key]
        if depth + height - 1 > MAX_YAML_DEPTH:
            raise YamlRefused(
                f"aliases nest the document deeper than {MAX_YAML_DEPTH} levels: write it out",
                _line(node),
            )
        return count, height


def _check_size(text: str) -> None:
    # A str never has more characters than UTF-8 bytes: skip encoding huge texts.
    if len(text) > MAX_YAML_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_YAML_BYTES:
        raise YamlRefused(
            f"the text is larger than {MAX_YAML_BYTES // 1024} KiB: "
            "split the procedure into smaller flows"
        )


class _FastLoader(CParser, SafeConstructor, Resolver):
    """libyaml's parser and composer (C), with ``_Loader``'s scalars and constructors.

    Values are counted in ``descend_resolver``, so a text past MAX_YAML_NODES costs what
    its first values cost. The depth and tag checks ``_Loader`` makes while composing are
    made on the composed nodes instead (``_build_tree``, ``_check_expansion``): composing
    happens in C, where libyaml's own nesting limit keeps the recursion bounded.
    """

    yaml_implicit_resolvers = _Loader.yaml_implicit_resolvers
    yaml_constructors = _Loader.yaml_constructors
    construct_line_map = _Loader.construct_line_map
    construct_line_list = _Loader.construct_line_list
    construct_strict_bool = _Loader.construct_strict_bool
    construct_strict_int = _Loader.construct_strict_int
    construct_strict_float = _Loader.construct_strict_float

    def __init__(self, stream: str) -> None:
        CParser.__init__(self, stream)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        # libyaml calls descend_resolver and ascend_resolver around every node it composes
        # (an alias excepted); without path resolvers (asserted below, with _RESOLVERS)
        # Resolver's own would do nothing. The first counts values: a function of the
        # instance, not a method, as a closure's counter costs a third of a method's.
        self.descend_resolver = _value_counter()  # type: ignore[method-assign, assignment]

    def ascend_resolver(self) -> None:
        return None

    def resolve(self, kind: type[Node], value: str | None, implicit: Any) -> str:
        # libyaml calls this for every node it composes: Resolver.resolve's answer for our
        # table (no wildcard or path resolvers), with the resolvers looked up once.
        if kind is ScalarNode:
            if implicit[0]:
                assert value is not None
                for tag, regexp in _RESOLVERS.get(value[:1], ()):
                    if regexp.match(value):
                        return tag
            return _STR
        return _SEQ if kind is SequenceNode else _MAP


def _value_counter() -> Callable[[Any, Any], None]:
    """``descend_resolver`` for one document: refuse the first value past MAX_YAML_NODES."""
    left = MAX_YAML_NODES

    def count_value(current_node: Any, current_index: Any) -> None:
        nonlocal left
        left -= 1
        if left < 0:
            raise YamlRefused(TOO_MANY_VALUES)

    return count_value


def parse_yaml(text: str) -> LoadedDoc:
    """Parse one flow document safely.

    Raises YamlRefused (too large, too many values, too deep, alias bomb, a non-standard
    tag such as ``!!python/...``, or not a mapping) and yaml.YAMLError (does not parse).

    libyaml (C) parses first: it is about ten times faster than PyYAML's pure-Python
    parser, so a thousand flows load in seconds, not minutes.
    """
    _check_size(text)
    with cycle_collector_held():
        if not _FAST:
            return _parse(_Loader(text))
        loader = _FastLoader(text)
        try:
            try:
                root = loader.get_single_node()
            except yaml.YAMLError as unread:
                reread = _reread(text, unread)
                if reread is None:
                    raise
                return reread
            # Without an "&" there is no anchor, so no alias: the nodes form a tree.
            return _built(loader, root, tree="&" not in text)
        finally:
            loader.dispose()


_FAST = bool(yaml.__with_libyaml__)


@contextlib.contextmanager
def cycle_collector_held() -> Iterator[None]:
    """CPython's cycle collector held off while flows are parsed and built.

    Parsing allocates a few objects per value, all freed by reference counting, yet their
    allocations set off the collector's full passes over every object of the process: a
    third of a 1,000-flow load went there.
    """
    # Left alone when something else turned it off. A parse in another thread that ends
    # first turns it back on early, which only costs time.
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _reread(text: str, unread: yaml.YAMLError) -> LoadedDoc | None:
    """What the pure-Python loader makes of a text libyaml could not read, or None: leave
    libyaml's error as it is.

    PyYAML's errors name what they found ("found character '\\t'"; the alias or anchor by
    name) where libyaml's do not. It costs some 2 µs a character, so it reads only when
    libyaml's error lies within REREAD_WITHIN characters, and no further.
    """
    mark = getattr(unread, "problem_mark", None) or getattr(unread, "context_mark", None)
    if mark is not None and mark.index > REREAD_WITHIN:
        return None
    try:
        return _parse(_Loader(text, stop_after=REREAD_WITHIN))
    except _OverBudget:
        return None


def _parse(loader: _Loader) -> LoadedDoc:
    try:
        return _built(loader, loader.get_single_node())
    finally:
        loader.dispose()


def _built(loader: Any, root: Node | None, *, tree: bool = False) -> LoadedDoc:
    """The document of a composed ``root``: in one pass for a ``tree``, else constructed."""
    if not isinstance(root, MappingNode):
        raise YamlRefused(NOT_A_MAPPING, None if root is None else _line(root))
    data = _build_tree(loader, root) if tree else None
    if data is None:
        _check_expansion(root)
        data = loader.construct_document(root)
    assert isinstance(data, YamlMap)
    return LoadedDoc(data=data)


_STR = _TAG_PREFIX + "str"
_NULL = _TAG_PREFIX + "null"
_SEQ = _TAG_PREFIX + "seq"
_MAP = _TAG_PREFIX + "map"
_CONSTRUCTED = frozenset(_TAG_PREFIX + name for name in ("bool", "int", "float"))
# The implicit resolvers by first character, as Resolver.resolve looks them up.
_RESOLVERS: dict[str, tuple[tuple[str, re.Pattern[str]], ...]] = {
    first: tuple(resolvers) for first, resolvers in _Loader.yaml_implicit_resolvers.items()
}
assert None not in _RESOLVERS and not _Loader.yaml_path_resolvers  # what resolve() assumes


class _NotPlain(Exception):
    """The tree holds something ``_build_tree`` leaves to the general path."""


def _build_tree(loader: _FastLoader, root: MappingNode) -> YamlMap | None:
    """The document of a composed tree (no aliases), or None to leave it to the general path.

    Builds what ``construct_document`` builds, making ``_check_expansion``'s depth and tag
    checks in the same pass. Anything else (a foreign tag, a key that is a list or a
    mapping) gives None. Only for a tree: an alias would be built twice here, where the
    constructors share it.
    """
    builder = _TreeBuilder(loader)
    try:
        data = builder.build(root, 1)
    except _NotPlain:
        return None
    assert isinstance(data, YamlMap)
    data.any_duplicates = builder.any_duplicates
    return data


class _TreeBuilder:
    # Methods, not closures: a recursive closure is a reference cycle, which would keep
    # each loader alive until the cycle collector runs.

    def __init__(self, loader: _FastLoader) -> None:
        self.loader = loader
        self.any_duplicates = False

    def scalar(self, node: ScalarNode) -> Any:
        tag = node.tag
        if tag == _STR:
            return node.value
        if tag == _NULL:
            return None
        if tag in _CONSTRUCTED:
            return self.loader.yaml_constructors[tag](self.loader, node)
        raise _NotPlain

    def build(self, node: Node, depth: int) -> Any:
        kind, inner = type(node), depth + 1
        if kind is MappingNode and node.tag == _MAP:
            pairs: list[tuple[Node, Node]] = node.value
            if pairs and inner > MAX_YAML_DEPTH:
                raise YamlRefused(TOO_DEEP, _line(pairs[0][0]))
            result = YamlMap(node.start_mark.line + 1)
            key_lines = result.key_lines
            for key_node, value_node in pairs:
                if type(key_node) is not ScalarNode:
                    raise _NotPlain  # a list or a mapping as a key: not hashable
                key = key_node.value if key_node.tag == _STR else self.scalar(key_node)
                line = key_node.start_mark.line + 1
                if key in result:
                    result.duplicates.append((key, line))
                    self.any_duplicates = True
                if type(value_node) is ScalarNode:
                    value = value_node.value if value_node.tag == _STR else self.scalar(value_node)
                else:
                    value = self.build(value_node, inner)
                result[key] = value
                key_lines[key] = line
            return result
        if kind is SequenceNode and node.tag == _SEQ:
            nodes: list[Node] = node.value
            if nodes and inner > MAX_YAML_DEPTH:
                raise YamlRefused(TOO_DEEP, _line(nodes[0]))
            items = YamlList(node.start_mark.line + 1)
            item_lines = items.item_lines
            for item in nodes:
                if type(item) is ScalarNode:
                    items.append(item.value if item.tag == _STR else self.scalar(item))
                else:
                    items.append(self.build(item, inner))
                item_lines.append(item.start_mark.line + 1)
            return items
        raise _NotPlain
