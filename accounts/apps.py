from django.apps import AppConfig


class AccountsConfig(AppConfig):
    default_auto_field = 'django.db.models.BigAutoField'
    name = 'accounts'

    def ready(self) -> None:
        from django.contrib.auth.signals import user_login_failed

        from accounts.throttles import on_login_failed

        user_login_failed.connect(on_login_failed, dispatch_uid="podium-sign-in-throttle")

        from core import after_response

        after_response.connect()  # a token's last use is written after the response (accounts.authentication)
