from django.apps import AppConfig


class ReviewsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "reviews"

    def ready(self) -> None:
        from ingest.panels import register_result_panel
        from ingest.signals import submission_finished
        from ingest.visibility import register_hold
        from reviews import selectors, services

        register_hold("reviews.undecided-flag", selectors.held_results)
        register_result_panel("reviews.flags", template="reviews/_result_review.html",
                              context=selectors.result_review, order=10)

        def judge(sender: object, submission: object, **kwargs: object) -> None:
            services.on_submission_finished(submission=submission)

        submission_finished.connect(judge, dispatch_uid="reviews-on-submission-finished", weak=False)
