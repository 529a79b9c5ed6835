from __future__ import annotations

import re

import pytest
from django.test import Client

from catalog.models import Round
from core.errors import Refusal
from ingest.models import Result, System
from leaderboard.compare import parse_ids
from tests.factories import BenchmarkFactory, ResultFactory, RoundFactory, RunFactory, SystemFactory
from tests.people import PASSWORD, make_people, set_phase


@pytest.fixture
def people():
    return make_people()


def _result(round_, benchmark, organization, slug: str, accelerators: int, score: float, *,
            description: dict, hyperparameters: list[dict], division: str = System.Division.CLOSED,
            category: str = System.Category.AVAILABLE) -> Result:
    system = SystemFactory(round=round_, organization=organization, slug=slug, name=slug.upper(),
                           accelerator_count=accelerators, division=division, category=category,
                           description=description)
    result = ResultFactory(system=system, benchmark=benchmark, score=score, raw_score=score,
                           submitter=organization.name, system_name=system.name, accelerator_model="X100",
                           accelerator_count=accelerators, host_count=1, category=category, division=division,
                           accelerator_minutes=score * accelerators)
    for position, values in enumerate(hyperparameters):
        RunFactory(result=result, position=position, hyperparameters=values)
    return result


@pytest.fixture
def results(people):
    round_ = RoundFactory(slug="training-v9.0", name="MLPerf Training v9.0")
    resnet = BenchmarkFactory(round=round_, key="resnet", name="ResNet-50")
    a = _result(round_, resnet, people.acme, "acme-8", 8, 30.0,
                description={"system_name": "ACME-8", "framework": "PyTorch", "host_memory_capacity": "1 TB"},
                hyperparameters=[{"global_batch_size": 256, "opt_base_learning_rate": 0.1},
                                 {"global_batch_size": 999, "opt_base_learning_rate": 0.1}])
    b = _result(round_, resnet, people.zeta, "zeta-8", 8, 25.0,
                description={"system_name": "ZETA-8", "framework": "PyTorch", "cooling": "liquid"},
                hyperparameters=[{"global_batch_size": 512, "opt_base_learning_rate": 0.1}])
    c = _result(round_, resnet, people.zeta, "zeta-64", 64, 5.0, category=System.Category.PREVIEW,
                description={"system_name": "ZETA-64", "framework": "JAX"},
                hyperparameters=[{"global_batch_size": 4096}])
    other_round = RoundFactory(slug="training-v8.0", name="MLPerf Training v8.0")
    d = _result(other_round, BenchmarkFactory(round=other_round, key="resnet"), people.acme, "acme-open", 8, 20.0,
                division=System.Division.OPEN, description={"system_name": "ACME-OPEN"}, hyperparameters=[])
    return a, b, c, d


@pytest.fixture
def embargoed(people, results):
    round_ = RoundFactory(slug="training-v9.1", name="MLPerf Training v9.1")
    set_phase(round_, Round.Phase.REVIEW)
    return _result(round_, BenchmarkFactory(round=round_, key="resnet"), people.acme, "acme-secret", 8, 12.0,
                   description={"system_name": "ACME-SECRET"}, hyperparameters=[])


def _row(html: str, label: str) -> str:
    match = re.search(r"<tr[^>]*>\s*<th scope=\"row\">(?:<code>)?" + re.escape(label) + r"(?:</code>)?</th>.*?</tr>",
                      html, re.S)
    assert match, f"no row {label!r}"
    return match.group(0)


def _compare(client: Client, *results: Result, extra: str = ""):
    return client.get(f"/compare/?ids={','.join(str(r.pk) for r in results)}{extra}")


@pytest.mark.django_db
def test_rows_whose_values_differ_are_highlighted(client: Client, results) -> None:
    a, b, _, _ = results
    html = _compare(client, a, b).content.decode()
    assert 'class="differs"' in _row(html, "Score (minutes)") and "<mark>30.00</mark>" in html
    assert 'class="differs"' in _row(html, "Submitter")
    assert 'data-differs="false"' in _row(html, "Accelerators")
    assert 'data-differs="false"' in _row(html, "framework")


@pytest.mark.django_db
def test_description_fields_are_the_union_of_both_descriptions(client: Client, results) -> None:
    a, b, _, _ = results
    html = _compare(client, a, b).content.decode()
    memory, cooling = _row(html, "host_memory_capacity"), _row(html, "cooling")
    assert "1 TB" in memory and "—" in memory and 'class="differs"' in memory
    assert "liquid" in cooling and "—" in cooling


@pytest.mark.django_db
def test_hyperparameters_come_from_each_results_first_run(client: Client, results) -> None:
    a, b, _, _ = results
    html = _compare(client, a, b).content.decode()
    batch = _row(html, "global_batch_size")
    assert "256" in batch and "512" in batch and "999" not in batch
    assert 'data-differs="false"' in _row(html, "opt_base_learning_rate")


@pytest.mark.django_db
def test_derived_figures_are_labelled_as_not_official(client: Client, results) -> None:
    a, b, _, _ = results
    html = _compare(client, a, b).content.decode()
    assert "Derived — not an official score" in html
    assert "240" in _row(html, "Accelerator-minutes (acc·min)")


@pytest.mark.django_db
def test_only_differences_hides_equal_rows(client: Client, results) -> None:
    a, b, _, _ = results
    html = _compare(client, a, b, extra="&only=differences").content.decode()
    assert "opt_base_learning_rate" not in html and "global_batch_size" in html


@pytest.mark.django_db
def test_no_warning_when_round_division_category_and_scale_agree(client: Client, results) -> None:
    a, b, _, _ = results
    assert "data-warning" not in _compare(client, a, b).content.decode()


@pytest.mark.django_db
def test_warnings_for_scale_category_round_and_division(client: Client, results) -> None:
    a, _, c, d = results
    html = _compare(client, a, c, d).content.decode()
    warnings = re.findall(r"<p class=\"banner warning\" data-warning>(.*?)</p>", html, re.S)
    assert len(warnings) == 4
    assert any(w.startswith("Different rounds") for w in warnings)
    assert any(w.startswith("Different divisions (Closed, Open)") for w in warnings)
    assert any(w.startswith("Different categories (Available, Preview)") for w in warnings)
    assert any(w.startswith("Different scale (8, 64 accelerators)") for w in warnings)


@pytest.mark.django_db
def test_more_than_four_ids_are_refused(client: Client, people) -> None:
    round_ = RoundFactory()
    ids = [ResultFactory(system=SystemFactory(round=round_), benchmark__key=f"b{i}").pk for i in range(5)]
    response = client.get(f"/compare/?ids={','.join(map(str, ids))}")
    assert response.status_code == 400
    assert "2 to 4 different results; 5 given" in response.content.decode()


@pytest.mark.django_db
def test_one_ticked_result_keeps_the_selection_and_asks_for_another(client: Client, results) -> None:
    a = results[0]
    response = client.get(f"/compare/?ids={a.pk}")
    html = response.content.decode()
    assert response.status_code == 200
    assert "Pick at least 2 results to compare; 1 is picked." in html
    assert f'value="{a.pk}"' in html and "ACME-8" in html and "compare-error" not in html


@pytest.mark.django_db
def test_one_hidden_id_is_kept_in_the_box_but_not_named(client: Client, results, embargoed) -> None:
    response = client.get(f"/compare/?ids={embargoed.pk}")
    html = response.content.decode()
    assert response.status_code == 200 and "1 is picked" in html
    assert "ACME-SECRET" not in html and "v9.1" not in html


@pytest.mark.django_db
@pytest.mark.parametrize("hostile", ["²", "1,١٢", "9" * 400, ",".join(["1"] * 3) + ",-1", "1%00"])
def test_hostile_ids_are_a_bad_request_not_a_crash(client: Client, hostile: str) -> None:
    response = client.get("/compare/", {"ids": hostile})
    assert response.status_code == 400 and "is not a result id" in response.content.decode()


@pytest.mark.django_db
def test_on_phones_each_value_is_labelled_with_its_result(client: Client, results) -> None:
    a, b, _, _ = results
    html = _compare(client, a, b).content.decode()
    assert 'class="data compare stackable"' in html
    assert html.count('data-label="Larkspur Compute · ACME-8"') == html.count('data-label="') // 2
    score = _row(html, "Score (minutes)")
    assert "30.00" in score and "25.00" in score


def test_ids_come_as_a_list_or_as_repeated_parameters() -> None:
    assert parse_ids(["3,1", "3", " 7 "]) == [3, 1, 7]
    with pytest.raises(Refusal) as refused:
        parse_ids(["1,x"])
    assert refused.value.status == 400


@pytest.mark.django_db
def test_repeated_ids_parameters_from_a_checkbox_form(client: Client, results) -> None:
    a, b, _, _ = results
    response = client.get(f"/compare/?ids={a.pk}&ids={b.pk}")
    assert response.status_code == 200 and "ZETA-8" in response.content.decode()


@pytest.mark.django_db
def test_non_numeric_ids_are_a_bad_request(client: Client) -> None:
    assert client.get("/compare/?ids=1,<script>").status_code == 400


@pytest.mark.django_db
def test_a_hidden_id_answers_like_a_missing_one_and_leaks_nothing(client: Client, results, embargoed) -> None:
    a = results[0]
    hidden = _compare(client, a, embargoed)
    missing = client.get(f"/compare/?ids={a.pk},{embargoed.pk + 1000}")
    assert hidden.status_code == missing.status_code == 404
    text = hidden.content.decode()
    assert f"There is no result {embargoed.pk} that you can see." in text
    assert "ACME-SECRET" not in text and "v9.1" not in text and "ACME-8" not in text


@pytest.mark.django_db
def test_members_compare_their_own_embargoed_results(people, results, embargoed) -> None:
    alice = Client()
    assert alice.login(username="alice", password=PASSWORD)
    response = _compare(alice, results[0], embargoed)
    assert response.status_code == 200 and "ACME-SECRET" in response.content.decode()
    dave = Client()
    assert dave.login(username="dave", password=PASSWORD)
    assert _compare(dave, results[0], embargoed).status_code == 404


@pytest.mark.django_db
def test_compare_without_ids_offers_the_form(client: Client) -> None:
    response = client.get("/compare/")
    assert response.status_code == 200 and 'name="ids"' in response.content.decode()
