"""The importers' one reader of "content: text or a list of parts" (``flux.importers.model.content_text``)
gives each importer what its own copy gave: the same text for every value it read, an error (one
line naming the place and the field) for every value it refused. The old copies are kept here, as
the oracle, with their error lines."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flux.importers.model import ImportFormatError, as_text, content_text


def old_atif(value, where):
    if value is None:
        return ""
    if isinstance(value, str):
        return as_text(value, where, "message")
    if isinstance(value, list):
        parts = []
        for i, part in enumerate(value):
            if not isinstance(part, dict):
                raise ImportFormatError(f"{where}: message part {i + 1} must be an object")
            if part.get("type", "text") == "text":
                parts.append(as_text(part.get("text"), where, "text"))
        return "".join(parts)
    raise ImportFormatError(f"{where}: `message` must be a string or a list of content parts, got {type(value).__name__}")


def old_claude(c, where):
    if c is None:
        return ""
    if isinstance(c, str):
        return as_text(c, where, "tool_result.content")
    if isinstance(c, list):
        parts = []
        for item in c:
            if not isinstance(item, dict):
                raise ImportFormatError(f"{where}: a tool_result content item must be an object")
            if item.get("type", "text") == "text":
                parts.append(as_text(item.get("text"), where, "text"))
            else:
                parts.append(f"[{as_text(item.get('type'), where, 'type') or 'part'}]")
        return "".join(parts)
    raise ImportFormatError(f"{where}: `tool_result.content` must be a string or a list, got {type(c).__name__}")


def old_codex(content, where):
    if content is None:
        return ""
    if isinstance(content, str):
        return as_text(content, where, "content")
    if not isinstance(content, list):
        raise ImportFormatError(f"{where}: `content` must be a list of parts, got {type(content).__name__}")
    parts = []
    for p in content:
        if not isinstance(p, dict):
            raise ImportFormatError(f"{where}: a content part must be an object")
        if p.get("type") in ("output_text", "input_text", "text", "summary_text"):
            parts.append(as_text(p.get("text"), where, "text"))
    return "".join(parts)


CODEX_TEXT = ("output_text", "input_text", "text", "summary_text")
NEW = {
    "atif": lambda v, where: content_text(v, where, "message"),
    "claude": lambda v, where: content_text(v, where, "tool_result.content", mark_others=True),
    "codex": lambda v, where: content_text(v, where, "content", text_types=CODEX_TEXT, untyped_is_text=False),
}
OLD = {"atif": old_atif, "claude": old_claude, "codex": old_codex}

# Parts as logs hold them — and as hostile ones do: a missing, null, odd or non-string type; a
# missing or non-string text; a lone surrogate; a part that is not an object.
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.text("ab\ud800é", max_size=4))
_types = st.one_of(st.sampled_from(["text", "image", "output_text", "summary_text", "input_text", "tool_use", ""]),
                   _scalars, st.lists(st.integers(), max_size=1))
_parts = st.one_of(
    st.fixed_dictionaries({}, optional={"type": _types, "text": _scalars, "other": _scalars}),
    _scalars, st.lists(_scalars, max_size=2))
contents = st.one_of(_scalars, st.lists(_parts, max_size=4), st.dictionaries(st.just("text"), _scalars))


def _outcome(fn, value):
    try:
        return "ok", fn(value, "log.jsonl: line 3")
    except ImportFormatError as e:
        return "error", str(e)


@pytest.mark.parametrize("importer", sorted(NEW))
@settings(max_examples=500, deadline=None)
@given(value=contents)
def test_the_shared_reader_gives_what_each_importers_copy_gave(importer, value):
    new, old = _outcome(NEW[importer], value), _outcome(OLD[importer], value)
    assert new[0] == old[0], (new, old)
    if new[0] == "ok":
        assert new[1] == old[1]
    else:  # one line, naming the place (and, for a wrong value, its type) as the old line did
        assert "\n" not in new[1] and new[1].startswith("log.jsonl: line 3: ")
        got = old[1].rpartition("got ")[2]
        if "got " in old[1]:
            assert new[1].endswith("got " + got)


def test_an_error_names_the_field_and_the_part():
    with pytest.raises(ImportFormatError) as e:
        content_text(5, "f: step 2", "message")
    assert str(e.value) == "f: step 2: `message` must be a string or a list of content parts, got int"
    with pytest.raises(ImportFormatError) as e:
        content_text([{"text": "a"}, "b"], "f: step 2", "output.content")
    assert str(e.value) == "f: step 2: content part 2 of `output.content` must be an object, got str"
    with pytest.raises(ImportFormatError) as e:
        content_text([{"type": "text", "text": 7}], "f: line 9", "tool_result.content")
    assert str(e.value) == "f: line 9: `tool_result.content[0].text` must be a string, got int"


def test_each_importers_choice_changes_the_text():
    """The three choices are not idle: the same parts read three ways."""
    parts = [{"text": "a"}, {"type": "image"}, {"type": "output_text", "text": "b"}, {"type": "text", "text": "c"}]
    assert NEW["atif"](parts, "w") == "ac"
    assert NEW["claude"](parts, "w") == "a[image][output_text]c"
    assert NEW["codex"](parts, "w") == "bc"
