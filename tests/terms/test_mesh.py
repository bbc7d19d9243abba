"""The MeSH index and mapper on the real MeSH files in shared/data/mesh.

Expected values are read from the files by other means than the code under test: minidom for the XML, regular
expressions on its raw text, the csv module for the TSV tables, plain SQL on the built database.

shared/data/mesh/subset.xml is cut off inside its third record (D000003 has no TermList and no closing
tags), so the raw file is not well-formed XML; tests that need a complete file close the open elements."""

from __future__ import annotations

import csv
import hashlib
import re
import sqlite3
from pathlib import Path
from xml.dom import minidom

import pytest

from clinrag.core.errors import ClinragError, DataFormatError, IndexMismatchError, InvalidInputError
from clinrag.terms.mesh import MeshIndex, MeshIndexNotFoundError, build_mesh_index
from clinrag.terms.mesh_mapper import DEFAULT_THRESHOLD, MeshMapper
from clinrag.terms.mesh_names import normalize, singular, token_key
from clinrag.terms.mesh_sources import DescriptorXml

CLOSING = "\n   </Concept>\n  </ConceptList>\n </DescriptorRecord>\n</DescriptorRecordSet>\n"


@pytest.fixture(scope="module")
def mesh_dir(data_dir: Path) -> Path:
    return data_dir / "mesh"


@pytest.fixture(scope="module")
def tsv_files(mesh_dir: Path) -> list[Path]:
    return [mesh_dir / "terms.tsv", mesh_dir / "tree-numbers.tsv", mesh_dir / "symptoms.tsv"]


@pytest.fixture(scope="module")
def subset_text(mesh_dir: Path) -> str:
    return (mesh_dir / "subset.xml").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def closed_xml(tmp_path_factory: pytest.TempPathFactory, subset_text: str) -> Path:
    """subset.xml with the elements left open at its cut closed, so that it is well-formed."""
    path = tmp_path_factory.mktemp("xml") / "subset_closed.xml"
    path.write_text(subset_text + CLOSING, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tsv_index(tmp_path_factory: pytest.TempPathFactory, tsv_files: list[Path]) -> Path:
    return build_mesh_index(tsv_files, tmp_path_factory.mktemp("tsv") / "mesh.sqlite").path


@pytest.fixture(scope="module")
def xml_index(tmp_path_factory: pytest.TempPathFactory, closed_xml: Path) -> Path:
    return build_mesh_index([closed_xml], tmp_path_factory.mktemp("xmlindex") / "mesh.sqlite").path


@pytest.fixture(scope="module")
def tsv_mapper(tsv_index: Path) -> MeshMapper:
    return MeshMapper(MeshIndex(tsv_index))


@pytest.fixture(scope="module")
def names(mesh_dir: Path) -> dict[str, str]:
    """Preferred name → UI, from terms.tsv."""
    with (mesh_dir / "terms.tsv").open(encoding="utf-8", newline="") as handle:
        return {row["mesh_name"]: row["mesh_id"] for row in csv.DictReader(handle, delimiter="\t")}


def _tsv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))


# ---------------------------------------------------------------------------------------------- XML reading


def _children(node: minidom.Element, tag: str) -> list[minidom.Element]:
    return [c for c in node.childNodes if c.nodeType == c.ELEMENT_NODE and c.tagName == tag]


def _child(node: minidom.Element, *path: str) -> minidom.Element | None:
    for tag in path:
        found = _children(node, tag)
        if not found:
            return None
        node = found[0]
    return node


def _content(node: minidom.Element | None) -> str | None:
    if node is None:
        return None
    return "".join(t.data for t in node.childNodes if t.nodeType == t.TEXT_NODE).strip() or None


def _minidom_records(text: str) -> dict[str, dict]:
    records = {}
    for record in minidom.parseString(text.encode()).getElementsByTagName("DescriptorRecord"):
        concepts = _children(_child(record, "ConceptList"), "Concept")
        preferred = [c for c in concepts if c.getAttribute("PreferredConceptYN") == "Y"]
        terms = [
            _content(_child(term, "String"))
            for concept in concepts
            for term_list in _children(concept, "TermList")
            for term in _children(term_list, "Term")
        ]
        records[_content(_child(record, "DescriptorUI"))] = {
            "name": _content(_child(record, "DescriptorName", "String")),
            "scope_note": _content(_child(preferred[0], "ScopeNote")) if preferred else None,
            "tree_numbers": [_content(t) for t in _children(_child(record, "TreeNumberList"), "TreeNumber")],
            "entry_terms": list(dict.fromkeys(terms)),
        }
    return records


def test_xml_reader_yields_exactly_the_records_of_the_file(closed_xml, subset_text):
    expected = _minidom_records(subset_text + CLOSING)
    parsed = {d.ui: d for d in DescriptorXml(closed_xml)}
    assert list(parsed) == list(expected) == ["D000001", "D000002", "D000003"]
    for ui, want in expected.items():
        got = parsed[ui]
        assert got.name == want["name"]
        assert got.scope_note == want["scope_note"]
        assert list(got.tree_numbers) == want["tree_numbers"]
        assert list(got.entry_terms) == want["entry_terms"]
    assert parsed["D000002"].entry_terms == ("Temefos", "Temephos", "Abate", "Difos")
    assert parsed["D000003"].entry_terms == ()  # its TermList lies beyond the cut


def test_xml_values_agree_with_a_regex_read_of_the_raw_file(closed_xml, subset_text):
    parsed = list(DescriptorXml(closed_xml))
    assert [n for d in parsed for n in d.tree_numbers] == re.findall(
        r"<TreeNumber>([^<]+)</TreeNumber>", subset_text
    )
    assert [d.scope_note for d in parsed] == [
        s.strip() for s in re.findall(r"<ScopeNote>(.*?)</ScopeNote>", subset_text, re.S)
    ]
    term_strings = re.findall(
        r"<Term\s[^>]*>\s*<TermUI>[^<]*</TermUI>\s*<String>([^<]*)</String>", subset_text
    )
    assert [t for d in parsed for t in d.entry_terms] == list(dict.fromkeys(term_strings))
    names = re.findall(
        r"<DescriptorRecord [^>]*>\s*<DescriptorUI>(D\d+)</DescriptorUI>"
        r"\s*<DescriptorName>\s*<String>([^<]+)<",
        subset_text,
    )
    assert [(d.ui, d.name) for d in parsed] == names


def test_truncated_subset_gives_its_complete_records_then_a_typed_error(mesh_dir, subset_text):
    assert subset_text.count("<DescriptorRecord ") == 3 and subset_text.count("</DescriptorRecord>") == 2
    seen = []
    with pytest.raises(DataFormatError) as caught:
        seen.extend(d.ui for d in DescriptorXml(mesh_dir / "subset.xml"))
    assert seen == ["D000001", "D000002"]
    end_line = subset_text.count("\n") + 1
    assert f"line {end_line}" in str(caught.value) and "2 complete records" in str(caught.value)


def test_malformed_xml_fails_with_its_line_and_leaves_no_database(tmp_path, subset_text):
    lines = (subset_text + CLOSING).splitlines()
    broken_line = next(i for i, line in enumerate(lines) if "<TreeNumber>" in line)
    lines[broken_line] = lines[broken_line].replace("</TreeNumber>", "</TreeNumbr>")
    source = tmp_path / "broken.xml"
    source.write_text("\n".join(lines), encoding="utf-8")
    out = tmp_path / "db" / "mesh.sqlite"
    with pytest.raises(DataFormatError, match=f"line {broken_line + 1}, column"):
        build_mesh_index([source], out)
    assert not out.exists() and list(out.parent.iterdir()) == []


def test_a_failed_build_keeps_the_previous_index(tmp_path, mesh_dir, tsv_files):
    out = build_mesh_index(tsv_files, tmp_path / "mesh.sqlite").path
    before = hashlib.sha256(out.read_bytes()).hexdigest()
    with pytest.raises(DataFormatError, match="not well-formed"):
        build_mesh_index([mesh_dir], out)  # the folder holds the truncated subset.xml
    assert hashlib.sha256(out.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mesh.sqlite"]


@pytest.mark.parametrize(
    "doctype, entity",
    [
        ('<!DOCTYPE DescriptorRecordSet [<!ENTITY x "Calcimycin">]>', "&x;"),
        (
            '<!DOCTYPE DescriptorRecordSet [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">'
            '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;">]>',
            "&d;",
        ),
        ('<!DOCTYPE DescriptorRecordSet [<!ENTITY e SYSTEM "file:///etc/hostname">]>', "&e;"),
    ],
    ids=["internal-entity", "billion-laughs", "external-entity"],
)
def test_entity_declarations_are_refused_before_parsing(tmp_path, subset_text, doctype, entity):
    text = re.sub(r"<!DOCTYPE[^>]*>", doctype, subset_text + CLOSING, count=1)
    source = tmp_path / "entities.xml"
    source.write_text(text.replace("<String>Calcimycin</String>", f"<String>{entity}</String>", 1))
    with pytest.raises(DataFormatError, match="internal DTD subset"):
        list(DescriptorXml(source))
    with pytest.raises(DataFormatError):
        build_mesh_index([source], tmp_path / "mesh.sqlite")
    assert not (tmp_path / "mesh.sqlite").exists()


def test_an_undeclared_entity_is_a_parse_error_not_a_lookup(tmp_path, subset_text):
    source = tmp_path / "undeclared.xml"
    source.write_text((subset_text + CLOSING).replace("Calcimycin", "&ext;", 1))
    with pytest.raises(DataFormatError, match="undefined entity"):
        list(DescriptorXml(source))


def test_xml_index_holds_the_records_and_their_provenance(xml_index, closed_xml, subset_text):
    expected = _minidom_records(subset_text + CLOSING)
    with MeshIndex(xml_index) as index:
        for ui, want in expected.items():
            got = index.descriptor(ui)
            assert got is not None and (got.name, got.scope_note) == (want["name"], want["scope_note"])
            assert sorted(got.tree_numbers) == sorted(want["tree_numbers"])
            assert index.entry_terms(ui) == want["entry_terms"]
        assert index.descriptor("D999999") is None
        dtd_year = re.search(r'SYSTEM "desc(\d{4})\.dtd"', subset_text).group(1)
        assert index.version == dtd_year and index.metadata["version_source"] == "DTD name"
        assert index.metadata["language"] == re.search(r'LanguageCode = "(\w+)"', subset_text).group(1)
        (source,) = index.metadata["sources"]
        assert source["sha256"] == hashlib.sha256(closed_xml.read_bytes()).hexdigest()
        assert source["rows"] == 3 and index.metadata["has"] == {"scope_notes": True, "entry_terms": True}
        assert index.metadata["built_at"]


# ---------------------------------------------------------------------------------------------- TSV build


def test_tsv_build_counts_equal_the_row_counts(tsv_index, tsv_files):
    terms, trees, symptoms = (_tsv_rows(p) for p in tsv_files)
    descriptors = (
        {r["mesh_id"] for r in terms} | {r["mesh_id"] for r in trees} | {r["mesh_id"] for r in symptoms}
    )
    db = sqlite3.connect(tsv_index)
    assert db.execute("SELECT count(*) FROM descriptor").fetchone()[0] == len(descriptors) == len(terms)
    assert db.execute("SELECT count(*) FROM tree_number").fetchone()[0] == len(trees)
    assert db.execute("SELECT count(*) FROM symptom").fetchone()[0] == len(symptoms)
    assert db.execute("SELECT count(*) FROM symptom WHERE in_hsdn = 1").fetchone()[0] == sum(
        r["in_hsdn"] == "1" for r in symptoms
    )
    db.close()
    with MeshIndex(tsv_index) as index:
        counts = index.metadata["counts"]
        assert (counts["descriptors"], counts["tree_numbers"], counts["symptoms"]) == (
            len(terms),
            len(trees),
            len(symptoms),
        )
        assert [s["rows"] for s in index.metadata["sources"]] == [len(terms), len(trees), len(symptoms)]
        # The TSV tables have no scope notes and no entry terms, and name no MeSH year: the index says so.
        assert index.metadata["has"] == {"scope_notes": False, "entry_terms": False}
        assert index.version == "unknown"
        row = trees[len(trees) // 2]
        descriptor = index.descriptor(row["mesh_id"])
        assert descriptor.name == row["mesh_name"] and descriptor.scope_note is None
        assert set(descriptor.tree_numbers) == {
            r["mesh_tree_number"] for r in trees if r["mesh_id"] == row["mesh_id"]
        }
        assert index.entry_terms(row["mesh_id"]) == []
        assert index.is_symptom(symptoms[0]["mesh_id"]) is True


def _dump(path: Path) -> list:
    db = sqlite3.connect(path)
    try:
        return [
            db.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
            for table in ("descriptor", "tree_number", "term", "symptom", "trigram")
        ]
    finally:
        db.close()


def test_rebuilding_from_the_same_files_is_idempotent(tmp_path, tsv_files):
    first = build_mesh_index(tsv_files, tmp_path / "mesh.sqlite")
    stamp = first.path.stat().st_mtime_ns
    again = build_mesh_index(list(reversed(tsv_files)), tmp_path / "mesh.sqlite")
    assert again.skipped and not first.skipped and first.path.stat().st_mtime_ns == stamp
    contents = _dump(first.path)
    forced = build_mesh_index(list(reversed(tsv_files)), tmp_path / "mesh.sqlite", force=True)
    assert not forced.skipped and forced.fingerprint == first.fingerprint
    assert _dump(forced.path) == contents
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mesh.sqlite"]


def test_xml_and_tsv_merge_and_a_name_conflict_is_refused(tmp_path, closed_xml, tsv_files):
    report = build_mesh_index([tsv_files[0], closed_xml], tmp_path / "merged.sqlite", version="2015")
    assert report.counts["descriptors"] == len(_tsv_rows(tsv_files[0]))
    with MeshIndex(report.path) as index:
        assert index.version == "2015" and index.metadata["version_source"] == "given"
        assert index.descriptor("D000002").scope_note == "An organothiophosphate insecticide."
        assert "Abate" in index.entry_terms("D000002")
    renamed = tmp_path / "renamed.tsv"
    renamed.write_text("mesh_id\tmesh_name\nD000001\tCalcimycin Renamed\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="D000001 is named 'Calcimycin Renamed'"):
        build_mesh_index([closed_xml, renamed], tmp_path / "conflict.sqlite")
    assert not (tmp_path / "conflict.sqlite").exists()


def test_unknown_tsv_and_missing_sources_are_typed_errors(tmp_path):
    odd = tmp_path / "odd.tsv"
    odd.write_text("id\tlabel\nD1\tx\n")
    with pytest.raises(DataFormatError, match="unknown MeSH TSV header"):
        build_mesh_index([odd], tmp_path / "a.sqlite")
    with pytest.raises(DataFormatError, match="no such file"):
        build_mesh_index([tmp_path / "absent.xml"], tmp_path / "b.sqlite")


# ---------------------------------------------------------------------------------------------- opening


def test_a_missing_index_is_a_typed_error(tmp_path):
    with pytest.raises(MeshIndexNotFoundError, match="no MeSH index") as caught:
        MeshIndex(tmp_path / "none.sqlite")
    assert isinstance(caught.value, DataFormatError) and isinstance(caught.value, ClinragError)


def test_files_that_are_not_a_mesh_index_are_refused_and_never_overwritten(tmp_path, tsv_files):
    text = tmp_path / "notes.sqlite"
    text.write_text("not a database at all " * 100)
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE meta (key TEXT, value TEXT)").connection.commit()
    for path in (text, other, tmp_path):
        with pytest.raises(IndexMismatchError):
            MeshIndex(path)
    with pytest.raises(IndexMismatchError):
        build_mesh_index(tsv_files, text)
    assert text.read_text().startswith("not a database")


def test_an_older_format_is_refused_and_rebuilt_without_force(tmp_path, tsv_files):
    out = build_mesh_index(tsv_files[2:], tmp_path / "mesh.sqlite").path
    with sqlite3.connect(out) as db:
        db.execute("UPDATE meta SET value = '0' WHERE key = 'format_version'")
    db.close()
    with pytest.raises(IndexMismatchError, match="rebuild it"):
        MeshIndex(out)
    assert not build_mesh_index(tsv_files[2:], out).skipped
    assert MeshIndex(out).metadata["counts"]["symptoms"] == len(_tsv_rows(tsv_files[2]))


def test_a_source_without_records_is_a_typed_error(tmp_path, subset_text):
    empty = tmp_path / "empty.xml"
    empty.write_text(subset_text[: subset_text.index("<DescriptorRecord ")] + "</DescriptorRecordSet>\n")
    with pytest.raises(DataFormatError, match="no MeSH descriptor records"):
        build_mesh_index([empty], tmp_path / "mesh.sqlite")
    other_root = tmp_path / "other.xml"
    other_root.write_text("<QualifierRecordSet><QualifierRecord/></QualifierRecordSet>")
    with pytest.raises(DataFormatError, match="not MeSH descriptor XML"):
        build_mesh_index([other_root], tmp_path / "mesh.sqlite")
    assert list(tmp_path.glob("*.sqlite")) == []


# ---------------------------------------------------------------------------------------------- mapping


def test_normalisation_forms():
    assert normalize("  Alzheimer's   DISEASE ") == "alzheimer disease"
    assert normalize("Ménière's disease") == "meniere disease"
    assert singular("Nursing Homes") == "nursing home" and singular("Viruses, Glasses") == "virus glass"
    assert token_key("Diabetes Mellitus, Type 2") == token_key("type 2 diabetes mellitus")
    assert token_key("Home Nursing") == token_key("Nursing Homes")  # why word order is tried last


def test_exact_name_after_normalisation(tsv_mapper, names):
    mapping = tsv_mapper.map("  diabetes MELLITUS, type 2 ")
    assert mapping.match == "exact_name" and mapping.level == "normalized"
    assert mapping.descriptor.ui == names["Diabetes Mellitus, Type 2"] and mapping.score == 100
    assert mapping.normalized == "diabetes mellitus type 2" and not mapping.ambiguous


def test_inverted_word_order_maps_to_the_inverted_heading(tsv_mapper, names, tsv_files):
    mapping = tsv_mapper.map("type 2 diabetes mellitus")
    assert (mapping.match, mapping.level) == ("exact_name", "word_order")
    assert mapping.descriptor.ui == names["Diabetes Mellitus, Type 2"]
    trees = {r["mesh_tree_number"] for r in _tsv_rows(tsv_files[1]) if r["mesh_id"] == mapping.descriptor.ui}
    assert set(mapping.descriptor.tree_numbers) == trees and mapping.descriptor.scope_note is None


def test_plural_folding_comes_before_word_order(tsv_mapper, names):
    mapping = tsv_mapper.map("nursing home")
    assert mapping.level == "singular" and mapping.descriptor.ui == names["Nursing Homes"]
    assert tsv_mapper.map("home nursing").descriptor.ui == names["Home Nursing"]


def test_entry_terms_map_to_their_descriptor(xml_index):
    mapper = MeshMapper(MeshIndex(xml_index))
    abate = mapper.map("abate")
    assert (abate.match, abate.descriptor.ui, abate.matched_term) == ("entry_term", "D000002", "Abate")
    assert abate.descriptor.scope_note == "An organothiophosphate insecticide."
    inverted = mapper.map("Antibiotic, A23187")
    assert inverted.match == "entry_term" and inverted.descriptor.ui == "D000001"
    assert mapper.map("Calcimycin").match == "exact_name"


def test_a_misspelling_maps_fuzzily_above_the_threshold(tsv_mapper, names):
    mapping = tsv_mapper.map("Hypertenion")
    assert mapping.match == "fuzzy" and mapping.descriptor.ui == names["Hypertension"]
    assert DEFAULT_THRESHOLD <= mapping.score < 100 and mapping.threshold == DEFAULT_THRESHOLD
    assert mapping.candidates[0].ui == mapping.descriptor.ui
    assert [c.score for c in mapping.candidates] == sorted(
        (c.score for c in mapping.candidates), reverse=True
    )
    typo = tsv_mapper.map("myocardial infraction")
    assert typo.match == "fuzzy" and typo.descriptor.name == "Myocardial Infarction"
    first_letter = tsv_mapper.map("Vwaricose Veins")  # sorting its words alone would hide this typo
    assert first_letter.descriptor is not None and first_letter.descriptor.ui == names["Varicose Veins"]


def test_a_stricter_threshold_rejects_the_same_misspelling(tsv_index, names):
    mapping = MeshMapper(MeshIndex(tsv_index), threshold=99).map("Hypertenion")
    assert mapping.match == "none" and mapping.descriptor is None and mapping.threshold == 99
    assert mapping.candidates[0].ui == names["Hypertension"] and mapping.candidates[0].score < 99


def test_nonsense_maps_to_none_with_its_candidates_recorded(tsv_mapper, tsv_index):
    mapping = tsv_mapper.map("zorblax fentimorphic")
    assert mapping.match == "none" and mapping.descriptor is None and mapping.score is None
    assert 0 < len(mapping.candidates) <= tsv_mapper.max_candidates
    assert all(c.score < mapping.threshold for c in mapping.candidates)
    with MeshIndex(tsv_index) as index:
        assert (mapping.db_version, mapping.db_fingerprint) == (index.version, index.fingerprint)
    assert mapping.model_dump()["candidates"][0]["matched"]


def test_ties_are_broken_by_ui_and_flagged(tsv_mapper, names):
    mapping = tsv_mapper.map("Reaction, Graft vs Host")  # same words as two headings
    pair = sorted([names["Graft vs Host Reaction"], names["Host vs Graft Reaction"]])
    assert mapping.level == "word_order" and mapping.ambiguous
    assert mapping.descriptor.ui == pair[0] and [c.ui for c in mapping.candidates[:2]] == pair
    assert tsv_mapper.map("Reaction, Graft vs Host") == mapping


def test_bad_inputs_are_typed_errors(tsv_index, tsv_mapper):
    with pytest.raises(InvalidInputError):
        tsv_mapper.map(" ,;- ")
    with pytest.raises(InvalidInputError):
        tsv_mapper.map("x" * 501)
    with pytest.raises(InvalidInputError):
        MeshMapper(MeshIndex(tsv_index), threshold=120)
