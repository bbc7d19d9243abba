"""The ICD-10-CM chapter vocabulary, checked against the 2026 titles and ranges of the tabular list."""

import subprocess
import sys

import pytest
import simple_icd_10_cm as cm

from clinrag.core.errors import InvalidInputError
from clinrag.terms.icd10 import Chapter, chapter, chapter_menu, chapter_of, chapters, parse_chapter_reference


@pytest.mark.integration  # a fresh interpreter
def test_importing_the_knowledge_layer_does_not_parse_the_package_xml():
    # simple_icd_10_cm parses its XML when imported (seconds): every `clinrag consult` imports the tagger.
    code = (
        "import sys, clinrag.knowledge.tagging, clinrag.knowledge.base; "
        "sys.exit('simple_icd_10_cm' in sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_there_are_22_chapters_numbered_in_order():
    assert [c.number for c in chapters()] == list(range(1, 23))


def test_real_titles_and_ranges():
    assert chapter(9) == Chapter(9, "I00-I99", "Diseases of the circulatory system")
    assert chapter(1) == Chapter(1, "A00-B99", "Certain infectious and parasitic diseases")
    assert chapter(22) == Chapter(22, "U00-U85", "Codes for special purposes")
    assert chapter(5).title == "Mental, Behavioral and Neurodevelopmental disorders"
    assert chapter(17).code_range == "Q00-QA0"
    assert all("(" not in c.title and c.title == c.title.strip() for c in chapters())


def test_unknown_chapter_number_raises():
    for number in (0, 23):
        with pytest.raises(InvalidInputError):
            chapter(number)


@pytest.mark.parametrize(
    ("code", "number"),
    [
        ("I21.4", 9),
        ("I214", 9),
        ("J45", 10),
        ("J45.909", 10),
        ("A00-A09", 1),
        ("U07.1", 22),
        ("S72.001A", 19),
        ("O9A", 15),
        ("Z99.89", 21),
        (" i21.4 ", 9),
    ],
)
def test_chapter_of_codes_and_blocks(code, number):
    assert chapter_of(code).number == number


@pytest.mark.parametrize("code", ["XYZ", "I21.", "I99.99", "I00-I99", "9", ""])
def test_chapter_of_rejects_invalid_codes(code):
    with pytest.raises(InvalidInputError, match=f"'{code}'"):
        chapter_of(code)


def test_chapter_of_agrees_with_the_package_hierarchy():
    for c in chapters():
        first_block = cm.get_children(str(c.number))[0]
        assert chapter_of(first_block) == c


@pytest.mark.parametrize(
    ("value", "number"),
    [
        (9, 9),
        ("9", 9),
        ("IX", 9),
        ("ix", 9),
        ("Chapter 9", 9),
        ("chapter IX", 9),
        ("I00-I99", 9),
        ("(I00-I99)", 9),
        ("Diseases of the circulatory system", 9),
        ("DISEASES OF THE CIRCULATORY SYSTEM.", 9),
        ("9. Diseases of the circulatory system (I00-I99)", 9),
        ("XXII", 22),
        ("Codes for special purposes", 22),
        ("Injury, poisoning and certain other consequences of external causes", 19),
        ("V00-Y99", 20),
    ],
)
def test_parse_chapter_reference_accepts(value, number):
    assert parse_chapter_reference(value) == number


@pytest.mark.parametrize(
    "value",
    ["Cardiology", "23", "", 23, 0, "0", True, None, 9.0, "IIII", "circulatory system", "A00-A09",
     "10. Diseases of the circulatory system (I00-I99)", "Chapter"],
)  # fmt: skip
def test_parse_chapter_reference_rejects_non_chapters(value):
    assert parse_chapter_reference(value) is None


def test_menu_lists_every_chapter_and_each_line_parses_back():
    lines = chapter_menu().splitlines()
    assert len(lines) == 22
    assert lines[8] == "9. Diseases of the circulatory system (I00-I99)"
    assert lines[21] == "22. Codes for special purposes (U00-U85)"
    assert [parse_chapter_reference(line) for line in lines] == list(range(1, 23))
