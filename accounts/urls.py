from django.urls import URLPattern, URLResolver, include, path

from accounts import views

app_name = "accounts"
urlpatterns = [
    path("invitations/<str:token>/", views.invitation_accept, name="invitation"),
    path("organizations/<slug:slug>/members/", views.organization_members, name="members"),
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", views.token_revoke, name="token_revoke"),
]

auth_urlpatterns: list[URLPattern | URLResolver] = [
    # Django's own pages, with the sign-in and reset throttles (accounts.throttles) on the two that need them.
    path("login/", views.SignInView.as_view(), name="login"),
    path("password_reset/", views.ResetPasswordView.as_view(), name="password_reset"),
    path("", include("django.contrib.auth.urls")),
]
