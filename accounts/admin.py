from django.contrib import admin

from accounts.models import ApiToken, Invitation, Membership


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "organization", "role", "created_at"]
    list_filter = ["role", "organization"]
    search_fields = ["user__username", "organization__name"]


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    list_display = ["email", "organization", "role", "created_at", "expires_at", "accepted_at"]
    exclude = ["token_hash"]

    def has_add_permission(self, request, obj=None) -> bool:
        # An invitation needs its token mailed; only the members page (accounts.services) can do that.
        return False


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "scope", "expires_at", "revoked_at", "last_used_at"]
    exclude = ["secret_hash"]
    readonly_fields = ["prefix"]
