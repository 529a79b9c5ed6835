"""The upload form of the web page (the API validates the same fields with its serializer)."""

from __future__ import annotations

from typing import Any

from django import forms

from ingest.services.uploads import UploadRequest


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data: Any, initial: Any = None) -> list[Any]:
        files = data if isinstance(data, list | tuple) else ([data] if data else [])
        return [super(MultipleFileField, self).clean(f, initial) for f in files]


class UploadForm(forms.Form):
    round = forms.RegexField(r"^[a-z0-9][a-z0-9.-]*$", max_length=64,
                             error_messages={"invalid": "Choose a round.", "required": "Choose a round."})
    organization = forms.SlugField(required=False, max_length=120)
    bundle = forms.FileField(required=False)
    system = forms.FileField(required=False)
    results = MultipleFileField(required=False)
    benchmark = forms.CharField(required=False, max_length=60, strip=True)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("bundle") is None and not (data.get("system") and data.get("results")):
            raise forms.ValidationError("Choose a bundle (.tar.gz or .zip), or a system JSON and its result files.")
        return data

    def upload_request(self) -> UploadRequest:
        data = self.cleaned_data
        return UploadRequest(round=data["round"], organization=data.get("organization") or "",
                             bundle=data.get("bundle"), system=data.get("system"),
                             results=tuple(data.get("results") or ()), benchmark=data.get("benchmark") or None)

    def error_text(self) -> str:
        return " ".join(str(message) for errors in self.errors.values() for message in errors)
