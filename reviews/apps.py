from __future__ import annotations

from typing import TYPE_CHECKING

from django.apps import AppConfig

if TYPE_CHECKING:
    from accounts.models import Organization


class ReviewsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "reviews"

    def ready(self) -> None:
        from ingest.demo.steps import register_demo_step
        from ingest.panels import register_result_panel
        from ingest.signals import organization_notified, submission_finished
        from ingest.visibility import register_hold
        from reviews import demo, notify, selectors, services

        register_hold("reviews.undecided-flag", selectors.held_results)
        register_result_panel("reviews.flags", template="reviews/_result_review.html",
                              context=selectors.result_review, order=10)

        def judge(sender: object, submission: object, **kwargs: object) -> None:
            services.on_submission_finished(submission=submission)

        register_demo_step("reviews", demo.seed_review)
        submission_finished.connect(judge, dispatch_uid="reviews-on-submission-finished", weak=False)

        def deliver(sender: object, organization: Organization, text: str, url: str = "", subject: str = "",
                    detail: str = "", **kwargs: object) -> None:
            notify.notify_organization(organization=organization, text=text, url=url, subject=subject, detail=detail)

        organization_notified.connect(deliver, dispatch_uid="reviews-notify-organization", weak=False)
