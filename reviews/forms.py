from __future__ import annotations

from django import forms

from reviews.models import Flag


class FlagForm(forms.Form):
    rule = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}))
    anchor_file = forms.CharField(max_length=500, required=False)
    anchor_line = forms.IntegerField(min_value=1, required=False)
    run = forms.IntegerField(min_value=0, required=False, help_text="Run position (0-based), if it is about one run")


class CommentForm(forms.Form):
    body = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}))
    private = forms.BooleanField(required=False, help_text="Chairs only: keep out of the public record")


class DecisionForm(forms.Form):
    outcome = forms.ChoiceField(choices=Flag.Outcome.choices)
    scaling_factor = forms.FloatField(required=False, min_value=0.000001)
    note = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)

    def clean(self) -> dict:
        data = super().clean() or {}
        if data.get("outcome") == Flag.Outcome.SCALED and not data.get("scaling_factor"):
            self.add_error("scaling_factor", "Give the scaling factor to apply.")
        return data


class ResubmitForm(forms.Form):
    bundle = forms.FileField()


class BorrowForm(forms.Form):
    bundle = forms.FileField(help_text="Your entry's bundle with the borrowed hyperparameters, nothing else changed")
