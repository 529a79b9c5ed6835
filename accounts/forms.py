from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm, PasswordResetForm
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.http import HttpRequest

from accounts import throttles
from accounts.models import ApiToken, Membership

THROTTLED = "throttled"


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


class ThrottledAuthenticationForm(AuthenticationForm):
    """The sign-in form: a throttled attempt (accounts.throttles) is told why, not "wrong password"."""

    def get_invalid_login_error(self) -> ValidationError:
        refusal = throttles.login_refusal(self.request, self.cleaned_data.get("username") or "")
        if refusal is not None:
            return ValidationError(refusal, code=THROTTLED)
        return super().get_invalid_login_error()


class ThrottledAdminAuthenticationForm(AdminAuthenticationForm, ThrottledAuthenticationForm):
    """The admin's sign-in form, with the same throttle and message."""


class ThrottledPasswordResetForm(PasswordResetForm):
    """Sends nothing once the e-mail address or the client address asked too often."""

    def __init__(self, *args: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.request = request

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        email = cleaned.get("email")
        if email:
            refusal = throttles.reset_refusal(self.request, email)
            if refusal is not None:
                raise ValidationError(refusal, code=THROTTLED)
        return cleaned
