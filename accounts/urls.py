from django.urls import include, path

from accounts import views

app_name = "accounts"
urlpatterns = [
    path("invitations/<str:token>/", views.invitation_accept, name="invitation"),
    path("organizations/<slug:slug>/members/", views.organization_members, name="members"),
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<int:pk>/revoke/", views.token_revoke, name="token_revoke"),
]

auth_urlpatterns = [path("", include("django.contrib.auth.urls"))]
