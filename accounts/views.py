"""Account pages: accept an invitation, manage an organization's members, manage API tokens."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import LoginView, PasswordResetView
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts import services
from accounts.access import access_organization, organizations_of
from accounts.forms import (
    THROTTLED,
    ApiTokenForm,
    InvitationForm,
    SignUpForm,
    ThrottledAuthenticationForm,
    ThrottledPasswordResetForm,
)
from accounts.models import ApiToken, Membership
from accounts.sessions import BACKEND as SIGN_IN_BACKEND
from accounts.viewer import signed_in
from core import ratelimit
from core.errors import Refusal

TOKENS_PER_HOUR = 30


def _throttled(form: Any) -> bool:
    return any(error.code == THROTTLED for error in form.non_field_errors().as_data())


class SignInView(LoginView):
    """Django's sign-in page with the throttle of accounts.throttles: a refused attempt answers 429."""

    authentication_form = ThrottledAuthenticationForm

    def form_invalid(self, form: Any) -> HttpResponse:
        response = super().form_invalid(form)
        if _throttled(form):
            response.status_code = 429
        return response


class ResetPasswordView(PasswordResetView):
    """Django's password reset page, sending nothing once an address asked too often (429)."""

    form_class = ThrottledPasswordResetForm

    def get_form_kwargs(self) -> dict[str, Any]:
        return {**super().get_form_kwargs(), "request": self.request}

    def form_invalid(self, form: Any) -> HttpResponse:
        response = super().form_invalid(form)
        if _throttled(form):
            response.status_code = 429
        return response


def invitation_accept(request: HttpRequest, token: str) -> HttpResponse:
    invitation = services.invitation_for_token(token)
    if invitation is None:
        return render(request, "accounts/invitation_invalid.html", status=404)
    form = SignUpForm(request.POST or None)
    if request.method == "POST":
        try:
            if request.user.is_authenticated and "join" in request.POST:
                user = services.invitation_accept(token=token, user=request.user)
            elif form.is_valid():
                user = services.invitation_accept(token=token, username=form.cleaned_data["username"],
                                                  password=form.cleaned_data["password"])
                login(request, user, backend=SIGN_IN_BACKEND)
            else:
                user = None
        except Refusal as refusal:
            form.add_error(None, refusal.message)
            user = None
        if user is not None:
            messages.success(request, f"You joined {invitation.organization.name} as {invitation.role}.")
            may_upload = invitation.role in (Membership.Role.SUBMITTER, Membership.Role.ADMIN)
            return redirect("ingest:upload" if may_upload else "leaderboard:home")
    return render(request, "accounts/invitation_accept.html", {"invitation": invitation, "form": form})


@login_required
def organization_members(request: HttpRequest, slug: str) -> HttpResponse:
    organization = get_object_or_404(organizations_of(request.user), slug=slug)
    is_admin = organizations_of(request.user, (Membership.Role.ADMIN,)).filter(pk=organization.pk).exists()
    form = InvitationForm(request.POST or None)
    if request.method == "POST":
        organization = access_organization(request.user, slug, (Membership.Role.ADMIN,))
        if form.is_valid():
            accept_url = request.build_absolute_uri(reverse("accounts:invitation", args=["TOKEN"]))
            services.invitation_create(
                organization=organization, email=form.cleaned_data["email"], role=form.cleaned_data["role"],
                actor=signed_in(request), accept_url=accept_url.replace("TOKEN", "{token}"),
            )
            messages.success(request, f"Invitation sent to {form.cleaned_data['email']}.")
            return redirect("accounts:members", slug=slug)
    members = organization.memberships.select_related("user").order_by("user__username", "role")
    pending = organization.invitations.filter(accepted_at__isnull=True) if is_admin else []
    return render(request, "accounts/members.html", {"organization": organization, "members": members,
                                                      "form": form, "is_admin": is_admin, "pending": pending})


@login_required
def tokens(request: HttpRequest) -> HttpResponse:
    form = ApiTokenForm(request.POST or None)
    issued = None
    if request.method == "POST" and not ratelimit.allow(f"tokens:{request.user.pk}", limit=TOKENS_PER_HOUR,
                                                        period_seconds=3600):
        form.add_error(None, f"At most {TOKENS_PER_HOUR} new tokens an hour; try again later.")
    elif request.method == "POST" and form.is_valid():
        issued = services.api_token_issue(user=signed_in(request), name=form.cleaned_data["name"],
                                          scope=form.cleaned_data["scope"], days=form.cleaned_data["days"])
        form = ApiTokenForm()
    return render(request, "accounts/tokens.html", {
        "form": form,
        "issued": issued,
        "tokens": ApiToken.objects.filter(user=signed_in(request)),
    })


@login_required
@require_POST
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(ApiToken, pk=pk, user=signed_in(request))
    services.api_token_revoke(token=token, actor=signed_in(request))
    messages.success(request, f"Token {token.name} revoked.")
    return redirect("accounts:tokens")
