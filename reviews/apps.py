from django.apps import AppConfig


class ReviewsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "reviews"

    def ready(self) -> None:
        from ingest.signals import submission_finished
        from reviews import services

        def judge(sender: object, submission: object, **kwargs: object) -> None:
            services.on_submission_finished(submission=submission)

        submission_finished.connect(judge, dispatch_uid="reviews-on-submission-finished", weak=False)
