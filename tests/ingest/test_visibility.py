"""The selector API of ingest.visibility: one function per model, each with the publication hold built in,
and no public way to build the embargo filter without it. (The end-to-end matrix is
tests/test_permissions.py; the review side is tests/reviews/test_review_permissions.py.)"""

from __future__ import annotations

import ast
import datetime
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone

from ingest import visibility
from reviews.models import Flag
from tests.factories import (
    BenchmarkFactory,
    FindingFactory,
    OrganizationFactory,
    ResultFactory,
    RoundFactory,
    RunFactory,
    SubmissionFactory,
    SystemFactory,
)

ROOT = Path(__file__).resolve().parents[2]
SELECTORS = {"visible_results", "visible_round_results", "visible_results_of_rounds", "visible_runs",
             "visible_findings", "visible_systems", "visible_submissions", "visible_rounds",
             "visible_results_of_submission", "visible_findings_of_submission", "result_rows_of_submission",
             "finding_rows_of_submission", "FollowedSubmission"}


def test_the_public_api_is_the_selectors_and_nothing_that_forgets_the_hold() -> None:
    public = {name for name in vars(visibility) if not name.startswith("_") and callable(getattr(visibility, name))
              and getattr(getattr(visibility, name), "__module__", "") == visibility.__name__}
    # A new public function here must apply the hold; add it to this list only once it does.
    assert public == SELECTORS | {"register_hold", "viewer_fingerprint"}


def test_no_module_reaches_into_the_private_rule() -> None:
    offenders = []
    for path in ROOT.glob("*/**/*.py"):
        if ".venv" in path.parts or path.name == "visibility.py" or "tests" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == "ingest.visibility":
                offenders += [f"{path}: {a.name}" for a in node.names if a.name.startswith("_")]
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and \
                    isinstance(node.value, ast.Name) and node.value.id == "visibility":
                offenders.append(f"{path}:{node.lineno}: visibility.{node.attr}")
    assert not offenders


@pytest.fixture
def held_world(db):
    """A published round; Acme's system has a held bert result and a public resnet result, and a second
    Acme submission holds only the held bert entry's newer version."""
    round_ = RoundFactory(publication_date=timezone.now() - datetime.timedelta(days=1))
    acme = OrganizationFactory(name="Acme", slug="acme")
    system = SystemFactory(round=round_, organization=acme)
    resnet = ResultFactory(system=system, benchmark=BenchmarkFactory(round=round_, key="resnet"))
    bert_bench = BenchmarkFactory(round=round_, key="bert", name="BERT")
    old_bert = ResultFactory(system=system, benchmark=bert_bench, submission=resnet.submission, is_current=False)
    lonely = SubmissionFactory(round=round_, organization=acme)
    bert = ResultFactory(system=system, benchmark=bert_bench, submission=lonely)
    lonely_system = SystemFactory(round=round_, organization=acme)
    lonely_result = ResultFactory(system=lonely_system, benchmark=bert_bench, submission=lonely,
                                  system_slug="other")
    for result in (resnet, bert, lonely_result):
        FindingFactory(result=result, run=RunFactory(result=result))
    bundle_finding = FindingFactory(result=None, submission=lonely, run=None)
    raiser = get_user_model().objects.create_user("raiser")
    for flagged in (old_bert, lonely_result):  # an undecided flag on any version holds the whole entry
        Flag.objects.create(round=round_, result=flagged, raised_by=raiser, rule="rcp", description="held")
    return {"round": round_, "system": system, "resnet": resnet, "bert": bert, "old_bert": old_bert,
            "lonely": lonely, "lonely_system": lonely_system, "lonely_result": lonely_result,
            "bundle_finding": bundle_finding}


def test_the_public_sees_no_held_result_and_nothing_that_exists_only_through_one(held_world) -> None:
    w, anyone = held_world, AnonymousUser()
    results = set(visibility.visible_results(anyone).values_list("pk", flat=True))
    assert results == {w["resnet"].pk}
    assert set(visibility.visible_runs(anyone).values_list("result_id", flat=True)) == {w["resnet"].pk}
    findings = set(visibility.visible_findings(anyone).values_list("pk", flat=True))
    assert w["bundle_finding"].pk not in findings
    assert set(visibility.visible_findings(anyone).values_list("result_id", flat=True)) == {w["resnet"].pk}
    # The system also holds a public result: it stays public. The lonely ones exist only through holds.
    assert set(visibility.visible_systems(anyone).values_list("pk", flat=True)) == {w["system"].pk}
    assert set(visibility.visible_submissions(anyone).values_list("pk", flat=True)) == {w["resnet"].submission_id}


def test_the_organization_and_staff_still_see_everything(held_world) -> None:
    from accounts.models import Membership
    from accounts.services import membership_add

    w = held_world
    member = get_user_model().objects.create_user("member")
    membership_add(user=member, organization=w["system"].organization, role=Membership.Role.SUBMITTER)
    staff = get_user_model().objects.create_user("root", is_staff=True)
    every = {w["resnet"].pk, w["bert"].pk, w["old_bert"].pk, w["lonely_result"].pk}
    for user in (member, staff):
        assert set(visibility.visible_results(user).values_list("pk", flat=True)) == every
        assert visibility.visible_submissions(user).filter(pk=w["lonely"].pk).exists()
        assert visibility.visible_systems(user).filter(pk=w["lonely_system"].pk).exists()


def test_a_submission_s_results_and_findings_are_the_rule_decided_for_its_organization(held_world) -> None:
    """visible_results_of_submission and visible_findings_of_submission (the upload's status) give what the
    whole rule gives, for its own members (no condition then), another organization's, the public and staff,
    in a published round with holds and in one not yet published."""
    from accounts.models import Membership
    from accounts.services import membership_add

    w = held_world
    acme = w["system"].organization
    member = get_user_model().objects.create_user("member")
    membership_add(user=member, organization=acme, role=Membership.Role.SUBMITTER)
    outsider = get_user_model().objects.create_user("outsider")
    membership_add(user=outsider, organization=OrganizationFactory(name="Other", slug="other"),
                   role=Membership.Role.SUBMITTER)
    staff = get_user_model().objects.create_user("root", is_staff=True)
    later = RoundFactory(publication_date=timezone.now() + datetime.timedelta(days=30))
    unpublished = ResultFactory(system=SystemFactory(round=later, organization=acme),
                                benchmark=BenchmarkFactory(round=later, key="bert"))
    FindingFactory(result=unpublished, run=RunFactory(result=unpublished))
    FindingFactory(result=None, submission=unpublished.submission, run=None)
    submissions = [w["resnet"].submission, w["lonely"], unpublished.submission, SubmissionFactory(round=later)]
    seen_by_member = 0
    for user in (member, outsider, AnonymousUser(), staff):
        for submission in submissions:
            results = visibility.visible_results(user).filter(submission=submission)
            findings = visibility.visible_findings(user).filter(submission=submission)
            assert set(visibility.visible_results_of_submission(user, submission).values_list("pk", flat=True)) \
                == set(results.values_list("pk", flat=True)), (user, submission)
            assert set(visibility.visible_findings_of_submission(user, submission).values_list("pk", flat=True)) \
                == set(findings.values_list("pk", flat=True)), (user, submission)
            # The rows the status shows, read once built for the organization's own members, the same ones.
            assert [row[0] for row in visibility.result_rows_of_submission(user, submission, ("pk",), ("pk",))] \
                == list(results.order_by("pk").values_list("pk", flat=True)), (user, submission)
            assert [row[0] for row in visibility.finding_rows_of_submission(user, submission, ("pk",), ("pk",))] \
                == list(findings.order_by("pk").values_list("pk", flat=True)), (user, submission)
            # What a client waiting for its state reads it again from holds it exactly when the rule does.
            followed = visibility.FollowedSubmission(user, submission)
            visible = visibility.visible_submissions(user).filter(pk=submission.pk).exists()
            assert (followed.state() == submission.state) is visible, (user, submission)
            row = followed.row()
            assert (row is not None) is visible, (user, submission)
            if row is not None:
                assert (row.pk, row.state, row.round.slug, row.organization.slug) == (
                    submission.pk, submission.state, submission.round.slug, submission.organization.slug)
            if user is member:
                seen_by_member += findings.count()
    from ingest.models import Finding

    # Every one, held and unpublished among them: the member's answer is the organization's whole.
    assert seen_by_member == Finding.objects.filter(submission__in=submissions).count() == 6
    assert not visibility.visible_results_of_submission(outsider, unpublished.submission).exists()


def test_a_system_or_submission_without_results_yet_is_not_held(held_world) -> None:
    round_ = held_world["round"]
    empty = SubmissionFactory(round=round_)
    system = SystemFactory(round=round_)
    assert visibility.visible_submissions(AnonymousUser()).filter(pk=empty.pk).exists()
    assert visibility.visible_systems(AnonymousUser()).filter(pk=system.pk).exists()


def test_deciding_the_flags_releases_everything(held_world) -> None:
    Flag.objects.update(state=Flag.State.RESOLVED, outcome=Flag.Outcome.REJECTED)
    anyone = AnonymousUser()
    assert visibility.visible_results(anyone).count() == 4
    assert visibility.visible_submissions(anyone).filter(pk=held_world["lonely"].pk).exists()
    assert visibility.visible_findings(anyone).filter(pk=held_world["bundle_finding"].pk).exists()


@pytest.mark.django_db
def test_the_fingerprint_follows_what_the_rule_grants() -> None:
    from accounts.models import Membership
    from accounts.services import membership_add
    from accounts.viewer import forget_viewer

    user = get_user_model().objects.create_user("fp")
    assert visibility.viewer_fingerprint(AnonymousUser()) == "anonymous"
    before = visibility.viewer_fingerprint(user)
    membership_add(user=user, organization=OrganizationFactory(), role=Membership.Role.SUBMITTER)
    forget_viewer(user)
    assert visibility.viewer_fingerprint(user) != before


# --- the held ids kept per results generation (outside a transaction only) ------------------------------

@pytest.mark.django_db(transaction=True)
def test_the_held_list_follows_the_generation_and_never_keeps_what_a_rollback_undid() -> None:
    from django.db import transaction

    from core.cache import bump_generation

    round_ = RoundFactory(publication_date=timezone.now() - datetime.timedelta(days=1))
    result = ResultFactory(system=SystemFactory(round=round_), benchmark=BenchmarkFactory(round=round_))
    raiser = get_user_model().objects.create_user("raiser")
    anyone = AnonymousUser()

    def public() -> bool:
        return visibility.visible_results(anyone).filter(pk=result.pk).exists()

    assert public() and visibility._held_now() == ()  # nothing held: no condition at all
    # A flag written in a transaction that rolls back: read live inside it, kept nowhere.
    with pytest.raises(RuntimeError), transaction.atomic():
        Flag.objects.create(round=round_, result=result, raised_by=raiser, rule="rcp", description="x")
        assert not public()
        raise RuntimeError("roll back")
    assert public()
    # A committed flag counts once the generation moves, as every service that writes one moves it.
    flag = Flag.objects.create(round=round_, result=result, raised_by=raiser, rule="rcp", description="x")
    bump_generation()
    assert not public() and visibility._held_now() == (result.pk,)
    assert not visibility.visible_systems(anyone).filter(pk=result.system_id).exists()
    Flag.objects.filter(pk=flag.pk).update(state=Flag.State.RESOLVED, outcome=Flag.Outcome.REJECTED)
    bump_generation()
    assert public() and visibility.visible_systems(anyone).filter(pk=result.system_id).exists()


@pytest.mark.django_db(transaction=True)
def test_beyond_the_list_limit_the_rule_stays_a_subquery(monkeypatch) -> None:
    from core.cache import bump_generation

    round_ = RoundFactory(publication_date=timezone.now() - datetime.timedelta(days=1))
    bench = BenchmarkFactory(round=round_)
    raiser = get_user_model().objects.create_user("raiser")
    held = [ResultFactory(system=SystemFactory(round=round_), benchmark=bench) for _ in range(3)]
    kept = ResultFactory(system=SystemFactory(round=round_), benchmark=bench)
    for result in held:
        Flag.objects.create(round=round_, result=result, raised_by=raiser, rule="rcp", description="x")
    monkeypatch.setattr(visibility, "HELD_LIST_MAX", 2)
    bump_generation()
    assert not isinstance(visibility._held_now(), tuple)
    assert set(visibility.visible_results(AnonymousUser()).values_list("pk", flat=True)) == {kept.pk}


@pytest.mark.parametrize("phase", ["open", "review", "published", "published, held", "no date"])
def test_one_rounds_results_are_the_rule_decided_for_that_round(db, phase) -> None:
    """visible_round_results decides the rule in Python for one round (no join to the round): every
    visitor must see exactly what visible_results(...).filter(round=...) shows, in every phase."""
    from catalog.models import Round
    from tests.people import make_people, set_phase

    people = make_people()
    round_, other = RoundFactory(), RoundFactory()
    benchmark = BenchmarkFactory(round=round_)
    mine = {org.slug: ResultFactory(system=SystemFactory(round=round_, organization=org), benchmark=benchmark)
            for org in (people.acme, people.zeta, people.omega)}
    ResultFactory(system=SystemFactory(round=other, organization=people.acme))  # another round: never counted
    round_.chairs.add(people.chair)
    if phase == "no date":
        set_phase(round_, Round.Phase.OPEN)
        Round.objects.filter(pk=round_.pk).update(publication_date=None)
        round_.refresh_from_db()
    else:
        set_phase(round_, Round.Phase.PUBLISHED if phase.startswith("published") else phase)
    if phase == "published, held":
        Flag.objects.create(round=round_, result=mine["acme"], raised_by=people.carol, rule="rcp", description="held")
    seen = {}
    for user in (AnonymousUser(), people.alice, people.carol, people.dave, people.chair, people.staff):
        expected = set(visibility.visible_results(user).filter(round=round_).values_list("pk", flat=True))
        decided = set(visibility.visible_round_results(user, round_).values_list("pk", flat=True))
        assert decided == expected, (phase, user)
        seen[str(user)] = decided
    every = {r.pk for r in mine.values()}
    assert seen["staff"] == every
    assert seen["alice"] >= {mine["acme"].pk}
    public = {"open": set(), "no date": set(), "review": set(), "published": every,
              "published, held": every - {mine["acme"].pk}}[phase]
    assert seen["AnonymousUser"] == public


def test_many_rounds_results_are_the_rule_decided_for_each_round(db) -> None:
    """visible_results_of_rounds over rounds in every phase at once, a hold in one of them, old versions
    included: what each visitor sees is visible_results(...).filter(round__in=...)."""
    from catalog.models import Round
    from tests.people import make_people, set_phase

    people = make_people()
    rounds = {phase: RoundFactory() for phase in ("open", "review", "published", "held")}
    made = {}
    for phase, round_ in rounds.items():
        set_phase(round_, Round.Phase.PUBLISHED if phase == "held" else phase)
        benchmark = BenchmarkFactory(round=round_)
        for org in (people.acme, people.zeta, people.omega):
            system = SystemFactory(round=round_, organization=org)
            made[phase, org.slug] = ResultFactory(system=system, benchmark=benchmark)
            ResultFactory(system=system, benchmark=benchmark, is_current=False)  # an older version
    rounds["review"].chairs.add(people.chair)
    Flag.objects.create(round=rounds["held"], result=made["held", "zeta"], raised_by=people.carol, rule="rcp",
                        description="held")
    chosen = [rounds["open"], rounds["review"], rounds["held"]]
    users = (AnonymousUser(), people.alice, people.carol, people.dave, people.chair, people.staff)
    for subset in (chosen, list(rounds.values()), [rounds["published"]], []):
        for user in users:
            expected = set(visibility.visible_results(user).filter(round__in=subset).values_list("pk", flat=True))
            decided = set(visibility.visible_results_of_rounds(user, subset).values_list("pk", flat=True))
            assert decided == expected, ([r.pk for r in subset], user)
    anyone = set(visibility.visible_results_of_rounds(AnonymousUser(), chosen).values_list("pk", flat=True))
    assert made["held", "acme"].pk in anyone and made["held", "zeta"].pk not in anyone
    assert made["review", "acme"].pk not in anyone
    chair = set(visibility.visible_results_of_rounds(people.chair, chosen).values_list("pk", flat=True))
    assert made["review", "omega"].pk in chair and made["open", "omega"].pk not in chair
