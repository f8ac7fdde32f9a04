from __future__ import annotations

import pytest

from cache.errors import InputError
from cache.texts import read_texts


def test_txt_one_per_line_blank_lines_skipped(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes("\ufeffWhat is 2 + 2?\r\n\nSolve $x^2 = 4$.\n\n".encode("utf-8"))
    assert read_texts(path) == ["What is 2 + 2?", "Solve $x^2 = 4$."]


def test_jsonl_strings_and_objects(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"text": "Q1 with\\nnewline", "id": 1}\n"Q2"\n\n{"question": "Q3"}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"t.jsonl:4: no 'text' key \(keys: question\)"):
        read_texts(path)
    path.write_text('{"text": "Q1 with\\nnewline", "id": 1}\n"Q2"\n', encoding="utf-8")
    assert read_texts(path) == ["Q1 with\nnewline", "Q2"]
    path.write_text('{"question": "Q3"}\n', encoding="utf-8")
    assert read_texts(path, field="question") == ["Q3"]


def test_non_utf8_names_line_and_byte(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes("caf\u00e9 ok\n".encode("utf-8") + "na\u00efve".encode("latin-1") + b"\n")
    with pytest.raises(InputError) as err:
        read_texts(path)
    message = str(err.value)
    assert "t.txt:2: not valid UTF-8 (byte 0xef at column 3)" in message and "iconv" in message


@pytest.mark.parametrize(
    "content,message",
    [
        ('{"text": "   "}\n', "t.jsonl:1: the text is empty"),
        ('{"text": 5}\n', "the text must be a string, got int"),
        ("{not json}\n", "t.jsonl:1: not valid JSON"),
        ("\n\n", "holds no texts"),
    ],
)
def test_bad_jsonl(tmp_path, content, message):
    path = tmp_path / "t.jsonl"
    path.write_text(content)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_texts(path)


def test_missing_file_and_bad_extension(tmp_path):
    with pytest.raises(InputError, match="texts file not found"):
        read_texts(tmp_path / "none.txt")
    (tmp_path / "t.csv").write_text("a\n")
    with pytest.raises(InputError, match="expected a .txt"):
        read_texts(tmp_path / "t.csv")


def test_a_bad_json_line_says_what_is_wrong_once(tmp_path):
    """Issue 35, item 8: the decoder's "Invalid control character at" followed by our "at column 9"
    read "at at column"; both readers (texts and questions) now say it once."""
    from generation.records import read_questions

    path = tmp_path / "t.jsonl"
    path.write_text('{"text": "a\tb"}\n', encoding="utf-8")  # a raw tab inside a JSON string
    with pytest.raises(InputError, match=r"t\.jsonl:1: not valid JSON \(Invalid control character at column 12\)$"):
        read_texts(path)
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"id": "a", "question": "x\ty"}\n', encoding="utf-8")
    with pytest.raises(
        Exception, match=r"q\.jsonl:1: not valid JSON \(Invalid control character at column 27\)"
    ) as err:
        read_questions(questions)
    assert "at at" not in str(err.value)
