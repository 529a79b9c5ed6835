from django.apps import AppConfig


class RunnersConfig(AppConfig):
    default_auto_field = 'django.db.models.BigAutoField'
    name = 'runners'
