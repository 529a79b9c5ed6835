"""The API schema describes token authentication: the extension is registered by the URLconf (not at app
start, which workers and commands pay for), so the schema must still carry it."""

from __future__ import annotations

import pytest
import yaml
from django.test import Client

pytestmark = pytest.mark.django_db


def test_the_schema_names_the_token_scheme() -> None:
    response = Client().get("/api/schema/")
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    scheme = schema["components"]["securitySchemes"]["tokenAuth"]
    assert scheme["type"] == "apiKey" and scheme["in"] == "header" and scheme["name"] == "Authorization"
