"""The web UI in a real headless browser: Debian's chromium driven by Playwright against `clinrag serve`
running as a subprocess.
The consultation page reads the patient's words into findings and a differential, and redraws everything
when a question is answered; the advanced page answers with any method, with expandable evidence and the
trace as a timeline; an interactive differential runs to its end, its differential updating after each
answer. Screenshots are kept in the test artifacts folder."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import httpx
import pytest

from tests.app.web.conftest import CASE, EXAMPLE

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser() -> Iterator:
    if not CHROMIUM.is_file():
        pytest.skip("Debian chromium is not installed (.ci/run installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    opened = browser.new_page(viewport={"width": 1280, "height": 900})
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def consult_served(served) -> str:
    """`clinrag serve` with its `consult` method built once for the module, by a first session, on the
    disease model built in the session's clinrag home (`consult_home`)."""
    response = httpx.post(f"{served}/v1/consult/sessions", json={"text": EXAMPLE}, timeout=600)
    assert response.status_code == 201, response.text
    return served


def test_consultation_page_shows_the_reasoning_and_redraws_after_an_answer(
    consult_served, page, artifacts_dir
) -> None:
    page.goto(f"{consult_served}/")
    page.fill("#text", EXAMPLE)
    page.click("#ask")
    page.wait_for_selector(".consultation[data-answered='0']", timeout=600_000)
    assert page.locator(".finding .name").all_inner_texts() == [
        "fever",
        "productive cough",
        "pleuritic chest pain",
    ]
    assert page.locator(".finding-present q").first.inner_text() == "fever"
    # how urgently comes first, above the findings, with the dangerous diagnoses to rule out
    assert "See a doctor today" in page.inner_text(".urgent.urgency-urgent[role='alert']")
    assert "call emergency services" in page.inner_text(".urgent .safety-net").lower()
    top = page.locator(".ddx-list .diagnosis-name").all_inner_texts()[:3]
    assert {"Pneumonia", "Acute Bronchitis"} & set(top)
    assert "fever" in page.locator(".ddx-list .diagnosis").first.locator(".supporting").inner_text()
    # the knowledge base's tests and care for the leading diagnoses, names only, and no medicine by name
    assert page.locator(".step-test li").count() >= 1 and page.locator(".step-drug li").count() == 0
    assert "only a doctor decides" in page.inner_text(".framing")
    # numbered references: [n] in the text, the list below with each reference's words and source
    first_ref = page.locator(".sentence .refs a").first
    assert first_ref.inner_text() == "1" and first_ref.get_attribute("href") == "#ref-1"
    first_ref.click()
    listed = page.locator(".references #ref-1")
    # the first sentence says how urgently and cites the can't-miss table, with its guideline
    assert "not to miss" in listed.inner_text() and "NICE" in listed.inner_text()
    graph_fact = page.locator(".references .evidence-graph_fact").first.inner_text()
    # its document with a public link, and the raw id; never a test-data table
    assert "https://" in graph_fact and "graph:" in graph_fact and "test data" not in graph_fact.lower()
    page.screenshot(path=str(artifacts_dir / "consultation.png"), full_page=True)

    first = page.locator("form.question").first
    concept = first.get_attribute("data-concept")
    before = page.locator(".ddx-list .diagnosis").all_inner_texts()
    first.locator(".answer-yes").click()
    page.wait_for_selector(".consultation[data-answered='1']")
    answered = page.locator(f".finding[data-concept='{concept}']")
    assert answered.count() == 1 and "finding-present" in answered.get_attribute("class")
    assert "(answered)" in answered.inner_text()
    assert concept not in [q.get_attribute("data-concept") for q in page.locator("form.question").all()]
    assert page.locator(".ddx-list .diagnosis").all_inner_texts() != before
    page.screenshot(path=str(artifacts_dir / "consultation-answered.png"), full_page=True)


def test_a_consultation_that_understands_nothing_says_so(consult_served, page) -> None:
    page.goto(f"{consult_served}/")
    page.fill("#text", "qwzx vbnm")
    page.click("#ask")
    page.wait_for_selector(".abstention")
    assert "no finding the patient has was understood" in page.inner_text(".abstention")
    assert page.locator(".ddx-list").count() == 0


def test_consultation_shows_the_answer_with_expandable_evidence(served, page, artifacts_dir) -> None:
    page.goto(f"{served}/advanced")
    page.fill("#text", CASE)
    page.select_option("#method", "doctorrag")
    page.fill("#params", '{"refine_iterations": 0}')
    page.click("#ask")
    page.wait_for_selector(".answer", timeout=600_000)
    evidence = page.locator(".evidence")
    assert evidence.count() >= 1
    assert page.locator(".evidence-statement").count() >= 1 and page.locator(".evidence-patient").count() >= 1
    first = evidence.first.locator("details")
    assert not first.evaluate("d => d.open")
    first.locator("summary").click()
    assert first.evaluate("d => d.open") and first.locator("pre").first.inner_text().strip()
    steps = page.locator(".timeline .step code").all_inner_texts()
    assert steps[0] == "retrieve" and "generate" in steps
    assert page.locator(".answer-text").inner_text().strip() not in ("", "(empty)")
    page.screenshot(path=str(artifacts_dir / "consult.png"), full_page=True)


def test_interactive_differential_updates_after_each_answer(served, page, artifacts_dir) -> None:
    page.goto(f"{served}/ddx")
    page.fill("#complaint", "I have a cough")
    page.select_option("select[name=sex]", "male")
    page.click("#start")
    page.wait_for_selector(".ddx-session")
    seen = []
    for _ in range(20):
        session = page.locator(".ddx-session")
        seen.append(page.locator(".differential tbody tr").all_inner_texts())
        if page.locator("#done").count():
            break
        asked = int(session.get_attribute("data-questions"))
        page.click("#answer-unknown" if len(seen) % 3 == 0 else "#answer-no")
        page.wait_for_selector(f".ddx-session[data-questions='{asked + 1}']")
    assert len(seen) >= 3 and all(len(rows) == 10 for rows in seen)
    assert any(a != b for a, b in pairwise(seen))  # the differential moved
    dialogue = page.locator(".dialogue li").all_inner_texts()
    assert dialogue[0].startswith("Do you have a cough?") and len(dialogue) == len(seen)
    page.screenshot(path=str(artifacts_dir / "ddx.png"), full_page=True)
