from __future__ import annotations

from django import forms
from django.contrib.auth.password_validation import validate_password

from accounts.models import ApiToken, Membership


class InvitationForm(forms.Form):
    email = forms.EmailField()
    role = forms.ChoiceField(choices=Membership.Role.choices, initial=Membership.Role.SUBMITTER)


class SignUpForm(forms.Form):
    username = forms.RegexField(regex=r"^[\w.@+-]{3,150}$", max_length=150,
                                help_text="3–150 letters, digits and @ . + - _")
    password = forms.CharField(widget=forms.PasswordInput, strip=False)

    def clean_password(self) -> str:
        password = self.cleaned_data["password"]
        validate_password(password)
        return password


class ApiTokenForm(forms.Form):
    name = forms.CharField(max_length=80, help_text="What the token is for, e.g. 'CI uploads'")
    scope = forms.ChoiceField(choices=ApiToken.Scope.choices, initial=ApiToken.Scope.READ)
    days = forms.IntegerField(min_value=1, max_value=365, initial=90, label="Valid for (days)")
